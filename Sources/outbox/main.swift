import Dispatch
import Foundation
import OutboxCore

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
switch command {
case .help:
    print(CommandLineParser.helpText)
case .version:
    print("outbox \(Outbox.version)")
case .checkConfig(let options):
    do {
        print(try ConfigLoader.load(options, environment: environment).effectiveJSON())
    } catch {
        fail(error.message, code: 2)
    }
case .serve(let options):
    let config: OutboxConfig
    do {
        config = try ConfigLoader.load(options, environment: environment)
    } catch {
        fail(error.message, code: 2)
    }
    let logger = Logger(level: config.logLevel)
    let server = ProxyServer(config: config, logger: logger)
    // Signals are taken as events on a queue, not in an async-signal handler.
    for signalNumber in [SIGTERM, SIGINT] { signal(signalNumber, SIG_IGN) }
    signal(SIGPIPE, SIG_IGN)
    let address: (host: String, port: Int)
    do {
        address = try server.start()
    } catch {
        fail("cannot listen on \(config.listen): \(error)", code: 1)
    }
    let shown = address.host.contains(":") ? "[\(address.host)]" : address.host
    FileHandle.standardError.write(Data("outbox listening on http://\(shown):\(address.port)\n".utf8))
    logger.info("started", ["version": Outbox.version, "upstream": config.upstream?.description ?? "-"])
    let stop = DispatchSemaphore(value: 0)
    let sources = [SIGTERM, SIGINT].map { signalNumber in
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
        source.setEventHandler {
            logger.info("stopping", ["signal": signalNumber == SIGTERM ? "TERM" : "INT"])
            stop.signal()
        }
        source.resume()
        return source
    }
    stop.wait()
    let clean = server.shutdown(timeout: config.limits.shutdownTimeoutSeconds)
    logger.info("stopped", ["clean": String(clean)])
    _ = sources
    exit(0)
}
