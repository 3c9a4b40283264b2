import Glibc
import OutboxModel

/// The `dataDirectory` of the config: created on start with mode 0700 (an existing one is set
/// to 0700), and proven writable before the proxy accepts anything, so a misconfigured path
/// fails at once (exit 1) rather than at the first request that needs storage. Spill files a
/// crash left behind are removed.
public enum DataDirectory {
    /// Creates `path` (and missing parents) with mode 0700, or sets an existing `path` to 0700,
    /// and checks that a file can be created in it. Returns a one-line reason on failure.
    public static func prepare(_ path: String) -> String? {
        var built = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            built += "/" + component
            if mkdir(built, 0o700) != 0 && errno != EEXIST {
                return "cannot create data directory \(path): \(String(cString: strerror(errno)))"
            }
        }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            return "data directory \(path) is not a directory"
        }
        // An existing directory keeps whatever mode it was made with (0755 from a `mkdir -p`, a
        // volume's 0777): the queue holds request bodies and credentials, so only the owner may
        // list or open what is in it (SPEC §6).
        if info.st_mode & 0o777 != 0o700, chmod(path, 0o700) != 0 {
            return "cannot set data directory \(path) to mode 0700: \(String(cString: strerror(errno)))"
        }
        let probe = path + "/.outbox-write-probe"
        let fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            return "data directory \(path) is not writable: \(String(cString: strerror(errno)))"
        }
        close(fd)
        unlink(probe)
        // Request bodies spilled by the last run are unlinked as soon as they are made; a crash
        // in that instant leaves a name behind, which no one will read again.
        SpillFile.removeLeftovers(in: path)
        return nil
    }
}
