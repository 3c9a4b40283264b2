/// Which listening socket accepted a connection. Without `admin.listen` there is only `main`,
/// serving proxy traffic and the admin API under `admin.pathPrefix`; with it, `admin` serves the
/// admin API alone and `main` only proxies.
enum ListenerRole: Sendable {
    case main
    case admin
}
