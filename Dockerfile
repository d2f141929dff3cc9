# syntax=docker/dockerfile:1
# Build: docker build -t catalog .
# Run:   docker run -p 8080:8080 -v catalog-data:/data catalog
# HTTPS: mount the certificate chain and its key (readable by uid 10001 only: chown 10001, chmod 600)
#        and name them; the listener then speaks TLS only, and the health check follows:
#   docker run -p 8443:8443 -v catalog-data:/data -v /etc/catalog/tls:/tls:ro -e CATALOG_PORT=8443 \
#     -e CATALOG_TLS_CERTIFICATE=/tls/fullchain.pem -e CATALOG_TLS_PRIVATE_KEY=/tls/privkey.pem -e CATALOG_HSTS=true catalog
#        After renewing the files, `docker kill -s HUP <container>` loads them without dropping a connection.

# --- Build stage: Swift 6 on Debian 12 with the C libraries the package links. ---
FROM swift:6.1-bookworm AS build
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libsqlite3-dev libssl-dev libpq-dev libvips-dev libcurl4-openssl-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
# Resolve dependencies in their own layer, reused while only sources change.
COPY Package.swift ./
RUN swift package resolve
COPY Sources ./Sources
COPY Tests ./Tests
# Built into the binary by the EmbedFiles plugin.
COPY Plugins ./Plugins
COPY Migrations ./Migrations
COPY openapi.yaml ./
RUN swift build -c release --static-swift-stdlib --product catalog-server \
    && mkdir -p /staging \
    && cp "$(swift build -c release --static-swift-stdlib --show-bin-path)/catalog-server" /staging/

# --- Runtime stage: the binary (with its migrations and contract inside), the libraries it loads,
#     and ffmpeg/ffprobe, which hosted videos are probed and packaged with (as child processes). ---
FROM debian:bookworm-slim
# Unpinned on purpose: the runtime takes Debian 12's security updates at each build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libsqlite3-0 libssl3 libpq5 libvips42 libcurl4 zlib1g libstdc++6 ca-certificates tzdata ffmpeg \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 catalog \
    && useradd --system --uid 10001 --gid catalog --home-dir /app --shell /usr/sbin/nologin catalog \
    && mkdir -p /data \
    && chown 10001:10001 /data
WORKDIR /app
# The binary carries its migrations and openapi.yaml (built in by the EmbedFiles plugin).
COPY --from=build /staging/catalog-server /app/catalog-server
ENV CATALOG_HOST=0.0.0.0 \
    CATALOG_PORT=8080 \
    CATALOG_DATABASE=/data/catalog.sqlite
VOLUME ["/data"]
EXPOSE 8080
USER 10001:10001
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 CMD ["/app/catalog-server", "healthcheck"]
# Exec form: the server is PID 1 and receives SIGTERM for its graceful shutdown.
ENTRYPOINT ["/app/catalog-server"]
