import OutboxModel

/// What an admin command (`outbox status`, `outbox drain`, …) asks of a running Outbox's
/// admin API, as typed on the command line. Values only: `OutboxControl` sends the request
/// and prints the answer, so parsing is tested without a server.
public enum AdminCommand: Sendable, Equatable {
    /// `outbox status`: `GET /admin/status`.
    case status
    /// `outbox health`: `GET /admin/status` with short, fixed timeouts, for a container's or a
    /// supervisor's health check; one line out, exit 0 only on a `200`.
    case health
    /// `outbox ops [filters]`: `GET /admin/operations?…`.
    case operations(OperationsFilter)
    /// `outbox op ID`: `GET /admin/operations/{id}`.
    case operation(id: String)
    /// `outbox drain [--timeout S]`: `GET /admin/drain?timeoutSeconds=S`, then the failed and
    /// conflicted operations when there are any.
    case drain(timeoutSeconds: Double)
    /// `outbox offline` / `outbox online`: `PUT /admin/connectivity`.
    case connectivity(offline: Bool)
    /// `outbox retry ID`: `POST /admin/operations/{id}/retry`.
    case retry(id: String)
    /// `outbox fault add …`: `POST /admin/faults` with this rule. The flags are turned into the
    /// rule's JSON here; whether the rule makes sense is the API's call, so the rules live in
    /// one place.
    case addFault(JSON)
    /// `outbox fault list`: `GET /admin/faults`.
    case listFaults
    /// `outbox fault clear`: `DELETE /admin/faults`.
    case clearFaults
    /// `outbox credentials set ORIGIN -H 'Name: value'…`: `PUT /admin/credentials` with this body.
    case setCredentials(JSON)
    /// `outbox credentials list`: `GET /admin/credentials`.
    case listCredentials
    /// `outbox credentials clear ORIGIN`: `DELETE /admin/credentials?origin=ORIGIN`.
    case clearCredentials(origin: String)

    /// The filters of `outbox ops`, each nil when not given.
    public struct OperationsFilter: Sendable, Equatable {
        public var status: OperationStatus?
        public var tag: String?
        public var origin: String?
        public var orderingKey: String?
        public var limit: Int?
        public var after: String?

        public init(status: OperationStatus? = nil, tag: String? = nil, origin: String? = nil,
                    orderingKey: String? = nil, limit: Int? = nil, after: String? = nil) {
            self.status = status
            self.tag = tag
            self.origin = origin
            self.orderingKey = orderingKey
            self.limit = limit
            self.after = after
        }
    }
}

/// An admin command with the options that say where the admin API is and how to print.
public struct AdminInvocation: Sendable, Equatable {
    public var command: AdminCommand
    /// `--admin URL`: the listener's base URL (`http://127.0.0.1:8080`); beats `OUTBOX_ADMIN_URL`
    /// and the config's addresses.
    public var adminURL: String?
    /// `--config FILE`: where `admin.pathPrefix`, `admin.token` and the addresses come from.
    public var configPath: String?
    /// `--json`: print the API's JSON instead of the human summary.
    public var json: Bool

    public init(command: AdminCommand, adminURL: String? = nil, configPath: String? = nil, json: Bool = false) {
        self.command = command
        self.adminURL = adminURL
        self.configPath = configPath
        self.json = json
    }
}
