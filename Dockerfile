# syntax=docker/dockerfile:1
# casambi2mqtt container image: a release build in a Rust image, run as a non-root user in a
# small Debian image. Build: `docker build -t casambi2mqtt .` (BuildKit, the default builder of
# Docker 23 and later) or `podman build --format docker -t casambi2mqtt .` (the docker format
# keeps the HEALTHCHECK: docs/cli.md#container).
# Configuration: mount a config file at /config/config.yaml, or use CASAMBI2MQTT_* variables
# alone; secrets: mount files and point `*_file` keys at them (e.g. /run/secrets/casambi_api_key).

FROM rust:1.95-bookworm AS build
# The cargo profile: `release` ships; the project's CI builds `ci-image` (the same code, less
# optimised) to test the image in a fraction of the time.
ARG PROFILE=release
WORKDIR /src
COPY . .
# cargo's own caches (the crate registry and target/) live in cache mounts that outlast the
# build, so a source edit recompiles only this crate, whatever targets Cargo.toml declares.
# target/ is a mount, so the binary is copied out of it.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile "$PROFILE" --locked --bin casambi2mqtt \
    && strip -o /casambi2mqtt "target/$PROFILE/casambi2mqtt"

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin casambi2mqtt \
    && mkdir -p /config && chown 10001 /config
# The CA bundle of the build image (Debian's ca-certificates) is all the TLS clients read: the
# package itself would bring openssl and its library along, unused.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /casambi2mqtt /usr/local/bin/casambi2mqtt
USER 10001
WORKDIR /config
# The web page and the health endpoints must be reachable from outside the container's loopback
# (the page is read-only there unless CASAMBI2MQTT_HTTP__TOKEN or its _FILE is set: docs/web.md).
# These variables win over the same keys of a mounted file (docs/configuration.md).
ENV CASAMBI2MQTT_HTTP__LISTEN=0.0.0.0:8099 \
    CASAMBI2MQTT_LOG__FORMAT=json
EXPOSE 8099
VOLUME ["/config"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["casambi2mqtt", "healthcheck"]
ENTRYPOINT ["casambi2mqtt"]
# `run` reads /config/config.yaml when it is there, and the environment alone otherwise.
CMD ["run"]
