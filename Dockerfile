# syntax=docker/dockerfile:1
# Build stage: compile the release binary. Migrations are embedded in it.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
COPY migrations ./migrations
# The root manifest names the benchmarks; none is built into the image, but cargo reads
# their files when it loads the manifest.
COPY benches ./benches
RUN cargo build --release --locked && cp target/release/cairn /usr/local/bin/cairn

# Runtime stage: a small image with the binary, TLS roots and curl for the health check.
FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/cairn --create-home cairn
COPY --from=build /usr/local/bin/cairn /usr/local/bin/cairn
USER cairn
WORKDIR /var/lib/cairn
ENV CAIRN_LISTEN_ADDR=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["cairn"]
CMD ["serve"]
