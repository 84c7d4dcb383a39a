# pv-controller: a static musl binary on distroless (no shell, no libc, runs as non-root), built
# with the `dist` profile (stripped, thin LTO; Cargo.toml), by the Rust that Cargo.toml's
# `rust-version` names. For those with a Docker daemon: scripts/build-image.sh builds the same image
# without one (an OCI layout, no base; the same ENTRYPOINT, CMD, USER and EXPOSE: checked by
# tests/cli/packaging.rs and scripts/e2e-image.sh). Tags: "v" + Cargo.toml's version.
#   docker build -t pv-controller:v0.1.0 .
FROM rust:1.90-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked --bin pv-controller \
 && cp target/dist/pv-controller /pv-controller

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /pv-controller /pv-controller
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/pv-controller"]
CMD ["run", "--metrics-addr=0.0.0.0:9090"]
