import OutboxModel

extension OutboxConfig {
    /// The effective config as pretty JSON in `config.example.json`'s key order (what
    /// `check-config` prints), every key present, the extension keys `logLevel` and
    /// `limits.shutdownTimeoutSeconds` included; `parse(json: effectiveJSON()) == self` holds
    /// whenever `admin.token` and `queue.postgres.url` are nil.
    /// A set token prints as `"[set]"` so secrets never reach a terminal or a log. No trailing
    /// newline.
    /// `showingURL` turns `queue.postgres.url` into what may be shown: by default `"[set]"`;
    /// the service passes libpq's reading of it with only the password replaced.
    public func effectiveJSON(showingURL: (String) -> String = { _ in "[set]" }) -> String {
        let document: [(key: String, value: JSON)] = [
            ("listen", .string(listen.description)),
            ("upstream", upstream.map { .string($0.description) } ?? .null),
            ("dataDirectory", .string(dataDirectory)),
            ("logLevel", .string(logLevel.rawValue)),
            ("forwardProxy", .object([
                ("enabled", .bool(forwardProxy.enabled)),
                ("allowedHosts", .array(forwardProxy.allowedHosts.map { .string($0) })),
                ("connectPorts", .array(forwardProxy.connectPorts.map { .int($0) })),
            ])),
            ("queue", .object([
                ("methods", .array(queue.methods.map { .string($0) })),
                ("maxBodyBytes", .int(queue.maxBodyBytes)),
                ("maxOperations", .int(queue.maxOperations)),
                ("ttlSeconds", .double(queue.ttlSeconds)),
                ("completedRetentionSeconds", .double(queue.completedRetentionSeconds)),
                ("unavailableStatuses", .array(queue.unavailableStatuses.map { .int($0) })),
                ("store", .string(queue.store.rawValue)),
                ("postgres", .object([
                    ("url", queue.postgres.url.map { .string(showingURL($0)) } ?? .null),
                    ("schema", .string(queue.postgres.schema)),
                    ("maxConnections", .int(queue.postgres.maxConnections)),
                    ("leaseSeconds", .double(queue.postgres.leaseSeconds)),
                    ("instanceName", .string(queue.postgres.instanceName)),
                ])),
            ])),
            ("replay", .object([
                ("maxConcurrentPerOrigin", .int(replay.maxConcurrentPerOrigin)),
                ("attemptTimeoutSeconds", .double(replay.attemptTimeoutSeconds)),
                ("authStatuses", .array(replay.authStatuses.map { .int($0) })),
                ("credentials", .array(replay.credentials.map { rule in
                    .object([("origin", .string(rule.originText)), ("headers", .array(rule.headers.map { .string($0) })),
                             ("from", .string(rule.source.rawValue))]
                            + (rule.source == .command ? [("command", .array(rule.command.map { .string($0) })),
                                                          ("timeoutSeconds", .double(rule.timeoutSeconds))] : []))
                })),
            ])),
            ("retry", .object([
                ("preset", .string(retry.preset.rawValue)),
                ("maxRetries", .int(retry.maxRetries)),
                ("baseDelaySeconds", .double(retry.baseDelaySeconds)),
                ("multiplier", .double(retry.multiplier)),
                ("maxDelaySeconds", .double(retry.maxDelaySeconds)),
                ("jitter", .bool(retry.jitter)),
                ("retryableStatuses", .array(retry.retryableStatuses.map { .int($0) })),
            ])),
            ("reachability", .object([
                ("probeIntervalSeconds", .double(reachability.probeIntervalSeconds)),
                ("probePath", .string(reachability.probePath)),
                ("connectTimeoutSeconds", .double(reachability.connectTimeoutSeconds)),
                ("responseTimeoutSeconds", .double(reachability.responseTimeoutSeconds)),
                ("forgetAfterSeconds", .double(reachability.forgetAfterSeconds)),
            ])),
            ("idempotency", .object([
                ("header", .string(idempotency.header)),
            ])),
            ("admin", .object([
                ("pathPrefix", .string(admin.pathPrefix)),
                ("listen", admin.listen.map { .string($0.description) } ?? .null),
                ("token", admin.token == nil ? .null : .string("[set]")),
                ("redactHeaders", .array(admin.redactHeaders.map { .string($0) })),
            ])),
            ("tls", .object([
                ("caFile", .string(tls.caFile)),
                ("verify", .bool(tls.verify)),
                ("clientCertificateFile", .string(tls.clientCertificateFile)),
                ("clientKeyFile", .string(tls.clientKeyFile)),
                ("intercept", .object([
                    ("hosts", .array(tls.intercept.hosts.map { .string($0) })),
                    ("caCertificateFile", .string(tls.intercept.caCertificateFile)),
                    ("caKeyFile", .string(tls.intercept.caKeyFile)),
                ])),
            ])),
            ("limits", .object([
                ("maxHeaderBytes", .int(limits.maxHeaderBytes)),
                ("headerTimeoutSeconds", .double(limits.headerTimeoutSeconds)),
                ("idleTimeoutSeconds", .double(limits.idleTimeoutSeconds)),
                ("maxConnections", .int(limits.maxConnections)),
                ("bodyMemoryBytes", .int(limits.bodyMemoryBytes)),
                ("shutdownTimeoutSeconds", .double(limits.shutdownTimeoutSeconds)),
            ])),
        ]
        return JSON.object(document).rendered(pretty: true, scalarArraysInline: true)
    }
}
