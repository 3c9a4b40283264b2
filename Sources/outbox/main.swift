import Foundation
import OutboxConfig
import OutboxControl
import OutboxService
import OutboxTelemetry

// Wiring only: parse the command line, load the config, start the server, wait for a signal.

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("outbox: \(message)\n".utf8))
    exit(code)
}

let command: OutboxCommand
do {
    command = try CommandLineParser.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    fail("\(error.message) (see outbox --help)", code: 2)
}

let environment = ProcessInfo.processInfo.environment

/// The effective config of `options`, or the one-line error and exit 2.
func loadConfig(_ options: CommandLineOptions) -> OutboxConfig {
    do {
        return try ConfigLoader.load(options, environment: environment)
    } catch {
        fail(error.message, code: 2)
    }
}

switch command {
case .help:
    print(CommandLineParser.helpText)
case .version:
    print("outbox \(Outbox.version)")
case .admin(let invocation):
    let result = AdminCommandRunner.run(invocation, environment: environment, userAgent: "outbox/\(Outbox.version)")
    FileHandle.standardOutput.write(Data(result.output.utf8))
    if let problem = result.problem { FileHandle.standardError.write(Data("outbox: \(problem)\n".utf8)) }
    exit(result.status.rawValue)
case .checkConfig(let options):
    print(OutboxService.effectiveConfigJSON(loadConfig(options)))
case .ca(let options, let force):
    let config = loadConfig(options)
    do {
        FileHandle.standardOutput.write(Data(try OutboxService.interceptionCertificatePEM(config: config, replacing: force)))
    } catch {
        fail(error.message, code: error.exitCode)
    }
case .migrate(let options):
    let config = loadConfig(options)
    do {
        print(try OutboxService.migrate(config: config))
    } catch {
        fail(error.message, code: error.exitCode)
    }
case .serve(let options):
    // Before any thread exists (the loops and Dispatch start threads), so all inherit the mask.
    OutboxService.blockTerminationSignals()
    let config = loadConfig(options)
    let logger = Logger(level: config.logLevel)
    // Before the queue opens its files; logged once started.
    let openFiles = OutboxService.raiseOpenFileLimit()
    if let problem = OutboxService.prepareDataDirectory(config.dataDirectory) { fail(problem, code: 1) }
    let service: OutboxService
    do {
        service = try OutboxService(config: config, logger: logger)
    } catch {
        fail(error.message, code: error.exitCode)
    }
    let addresses: (main: SocketAddressSpec, admin: SocketAddressSpec?)
    do {
        addresses = try service.start()
    } catch {
        fail(error.description, code: error.exitStatus)
    }
    // Through the logger's sink, so the lines never interleave with a log line. The admin line
    // comes first and has its own wording: whoever waits for the main line finds both ready.
    if let admin = addresses.admin { Logger.standardError("outbox admin listening on http://\(admin)") }
    Logger.standardError("outbox listening on http://\(addresses.main)")
    openFiles.log(to: logger)
    logger.info("started", ["version": Outbox.version, "upstream": config.upstream?.description ?? "-"])
    let received = OutboxService.waitForTerminationSignal()
    logger.info("stopping", ["signal": received == SIGTERM ? "TERM" : "INT"])
    let clean = service.stop(timeout: config.limits.shutdownTimeoutSeconds)
    logger.info("stopped", ["clean": String(clean)])
    exit(0)
}
