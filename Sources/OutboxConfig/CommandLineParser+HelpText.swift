extension CommandLineParser {
    /// Full usage: commands, flags, env vars, exit codes. Printed by `outbox --help` to stdout.
    public static let helpText = """
        Usage:
          outbox [serve] [--config FILE] [--listen HOST:PORT] [--upstream URL]
                 [--data-dir DIR] [--log-level debug|info|warn|error]
          outbox check-config [--config FILE] [flags as for serve]
          outbox ca [--force] [--config FILE] [--data-dir DIR]
          outbox --help | --version

        Outbox is a local HTTP/1.1 proxy. When the upstream answers it forwards; when it does
        not, write requests are stored durably, answered 202 Accepted, and replayed later.

        Commands:
          serve          Run the proxy (the default). Prints
                         "outbox listening on http://HOST:PORT" on stderr once it accepts
                         connections; SIGTERM or SIGINT stop it cleanly.
          check-config   Validate the configuration and print it, with every default filled
                         in, as JSON on stdout. The admin token prints as "[set]".
          ca             Print the interception CA certificate (PEM) on stdout, for clients
                         to trust. Unless tls.intercept names CA files, it is created in
                         DIR/ca/ at first need, limited to the config's tls.intercept.hosts.
                         --force replaces it (new key) with one for the current hosts;
                         restart a running Outbox afterwards.

        Flags (each overrides the config file; --flag=value works too):
          --config FILE          JSON config file (keys: see config.example.json)
          --listen HOST:PORT     Address to listen on; port 0 picks a free port
                                 (default 127.0.0.1:8080)
          --upstream URL         http:// or https:// origin for origin-form requests
          --data-dir DIR         Directory of the durable queue (default ./outbox-data)
          --log-level LEVEL      debug, info, warn or error (default info)
          --force                With ca: replace the CA
          -h, --help             Show this help
          --version              Show the version

        Environment:
          OUTBOX_CONFIG          Config file used when --config is not given
          OUTBOX_ADMIN_TOKEN     Overrides admin.token (admin requests then need
                                 "Authorization: Bearer TOKEN")

        Exit status:
          0  clean shutdown, or help/version/check-config/ca succeeded
          1  runtime failure (port in use, data directory not writable, ...)
          2  usage or configuration error
        """
}
