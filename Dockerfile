# casambi2mqtt container image: a release build in a Rust image, run as a non-root user in a
# small Debian image. Build: `docker build -t casambi2mqtt .`
# Configuration: mount a config file at /config/config.yaml (or use CASAMBI2MQTT_* variables);
# secrets: mount files and point `*_file` keys at them (e.g. /run/secrets/casambi_api_key).

FROM rust:1.95-bookworm AS build
WORKDIR /src
# Fetch dependencies in their own layer so source edits do not download them again.
COPY Cargo.toml Cargo.lock ./
# The patched embedded broker (`[patch.crates-io]`) resolves from its own directory.
COPY vendor vendor
RUN mkdir -p src benches \
    && echo 'fn main() {}' > src/main.rs && echo '' > src/lib.rs \
    && for b in $(sed -n '/^\[\[bench\]\]/,/^$/s/^name = "\(.*\)"/\1/p' Cargo.toml); do echo 'fn main() {}' > "benches/$b.rs"; done \
    && cargo fetch --locked
COPY . .
RUN cargo build --release --locked --bin casambi2mqtt \
    && strip target/release/casambi2mqtt

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin casambi2mqtt \
    && mkdir -p /config && chown 10001 /config
COPY --from=build /src/target/release/casambi2mqtt /usr/local/bin/casambi2mqtt
USER 10001
WORKDIR /config
# The web page and the health endpoints must be reachable from outside the container's loopback
# (the page is read-only there unless CASAMBI2MQTT_HTTP__TOKEN or its _FILE is set: docs/web.md).
ENV CASAMBI2MQTT_HTTP__LISTEN=0.0.0.0:8099 \
    CASAMBI2MQTT_LOG__FORMAT=json
EXPOSE 8099
VOLUME ["/config"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["casambi2mqtt", "healthcheck"]
ENTRYPOINT ["casambi2mqtt"]
CMD ["run", "-c", "/config/config.yaml"]
