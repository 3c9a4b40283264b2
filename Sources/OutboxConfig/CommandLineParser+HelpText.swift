extension CommandLineParser {
    /// Full usage: commands, flags, env vars, exit codes. Printed by `outbox --help` to stdout.
    public static let helpText = """
        Usage:
          outbox [serve] [--config FILE] [--listen HOST:PORT] [--upstream URL]
                 [--data-dir DIR] [--log-level debug|info|warn|error]
          outbox check-config [--config FILE] [flags as for serve]
          outbox ca [--force] [--config FILE] [--data-dir DIR]
          outbox migrate [--config FILE]
          outbox status | health | ops [FILTERS] | op ID | drain [--timeout S] | offline
                 | online | retry ID | fault add|list|clear
                 | credentials set ORIGIN -H 'Name: value'... | credentials list
                 | credentials clear ORIGIN                 [--admin URL] [--config FILE] [--json]
          outbox --help | --version

        Outbox is a local HTTP/1.1 proxy. When the upstream answers it forwards; when it does
        not, write requests are stored durably, answered 202 Accepted, and replayed later.

        Commands:
          serve          Run the proxy (the default). Prints
                         "outbox listening on http://HOST:PORT" on stderr once it accepts
                         connections; SIGTERM or SIGINT stop it cleanly.
          check-config   Validate the configuration and print it, with every default filled
                         in, as JSON on stdout. The admin token and a database password
                         print as "[set]".
          ca             Print the interception CA certificate (PEM) on stdout, for clients
                         to trust. Unless tls.intercept names CA files, it is created in
                         DIR/ca/ at first need, limited to the config's tls.intercept.hosts.
                         --force replaces it (new key) with one for the current hosts;
                         restart a running Outbox afterwards.
          migrate        Create or migrate the PostgreSQL store's schema (queue.store
                         "postgres", queue.postgres.url or OUTBOX_POSTGRES_URL) and print
                         its version. Instances also migrate at start.

        Admin commands (ask a running Outbox's admin API, print a summary; --json prints the
        API's JSON instead):
          status         Connectivity, counts by status, origins
          health         For health checks (the Docker image's HEALTHCHECK): exit 0 with one
                         line when the admin API answers GET /status with 200 within 5 s,
                         else exit 1 with one line saying why
          ops            Operations in queue order; filters --status S --tag T --origin O
                         --ordering-key K --limit N (1-1000) --after ID
          op ID          One operation with its headers, body and stored response
          drain          Wait until nothing is pending or in progress (--timeout SECONDS,
                         default 60, at most 3600); exit 3 lists the operations that ended
                         failed or conflict, exit 4 on timeout
          offline        Forward nothing, queue every queueable request, replay nothing
          online         Back to automatic connectivity
          retry ID       Make a failed, conflicted or waiting operation pending now
          fault add      Add a fault rule: --action status|reset|timeout|offline|latency
                         [--status N] [--retry-after S] [--body TEXT] [--latency S]
                         [--times N] [--probability P] [--seed N] [--for S] [--id ID]
                         [--origin URL] [--method M] [--path-prefix P]
                         [--apply-to direct|replay|both]
          fault list     The fault rules with their matched/applied counters
          fault clear    Remove every fault rule
          credentials set ORIGIN -H 'Name: value'...
                         Replay ORIGIN's writes with these header values (replacing the
                         stored ones), until cleared; held writes of ORIGIN go at once
          credentials list
                         The origins this instance has credentials for: names and
                         sources, never a value
          credentials clear ORIGIN
                         Forget the values set by hand for ORIGIN
        The admin API is found at --admin URL (the listener's base URL, e.g.
        http://127.0.0.1:8080), else OUTBOX_ADMIN_URL, else the config's admin.listen or
        listen; admin.pathPrefix and the token come from the config.

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
                                 "Authorization: Bearer TOKEN"); the admin commands send it
          OUTBOX_ADMIN_URL       Where the admin commands find the admin API
          OUTBOX_POSTGRES_URL    Overrides queue.postgres.url; libpq's PG* variables and
                                 ~/.pgpass fill in what it leaves out

        Exit status:
          0  clean shutdown, or help/version/check-config/ca/migrate/an admin command succeeded
          1  runtime failure (port in use, data directory not writable, ...); for an
             admin command: the API answered an error or could not be reached
          2  usage or configuration error; a PostgreSQL schema newer than this outbox
          3  drain: drained, but some operations ended failed or conflict
          4  drain: not drained within the timeout
        """
}
