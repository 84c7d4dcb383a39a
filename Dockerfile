# pv-controller: a static musl binary on distroless (no shell, no libc, runs as non-root).
#   docker build -t pv-controller:latest .
FROM rust:1-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin pv-controller \
 && cp target/release/pv-controller /pv-controller \
 && strip /pv-controller

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /pv-controller /pv-controller
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/pv-controller"]
CMD ["run", "--metrics-addr=0.0.0.0:9090"]
