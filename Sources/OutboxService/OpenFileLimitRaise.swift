import OutboxNet
import OutboxTelemetry

/// What raising the open-file limit at start did (``OutboxService/raiseOpenFileLimit()``), kept
/// for its log line.
public struct OpenFileLimitRaise: Sendable {
    fileprivate let result: Result<(before: OpenFileLimit, after: OpenFileLimit), SystemError>

    init(result: Result<(before: OpenFileLimit, after: OpenFileLimit), SystemError>) {
        self.result = result
    }

    /// One line: `info open_files_limit soft=… hard=… was=…` (`was`: the soft limit found), or
    /// `warn open_files_limit` with the limit and the error when it could not be raised (Outbox
    /// runs on with the limit it has).
    public func log(to logger: Logger) {
        switch result {
        case .success(let (before, after)):
            logger.info("open_files_limit", ["soft": after.softText, "hard": after.hardText, "was": before.softText])
        case .failure(let error):
            let limit = OpenFileLimit.current()
            logger.warn("open_files_limit", ["soft": limit?.softText ?? "-", "hard": limit?.hardText ?? "-",
                                             "error": error.description])
        }
    }
}
