import Glibc

extension SystemError {
    /// True when the call failed for lack of descriptors or kernel memory (`EMFILE`: this
    /// process's open-file limit; `ENFILE`: the system's; `ENOBUFS`, `ENOMEM`): Outbox's own
    /// shortage, which passes once descriptors are free again. Never a sign that a peer or an
    /// origin is unreachable (SPEC §6).
    package var isResourceShortage: Bool {
        code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM
    }
}
