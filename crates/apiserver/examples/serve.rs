//! Serves the API alone: `cargo run -p pv-apiserver --example serve -- DATA_DIR [ADDR]`.
//! Prints `kubeconfig: PATH` and `server: URL` once ready; stops on SIGINT/SIGTERM.

use pv_apiserver::{Server, ServerConfig};
use std::io::Write;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber_init();
    let mut args = std::env::args().skip(1);
    let data_dir: std::path::PathBuf = args.next().unwrap_or_else(|| "./.pv-controller".into()).into();
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:0".into()).parse()?;
    let h = Server::start(ServerConfig::new(data_dir, listen)).await?;
    println!("kubeconfig: {}", h.kubeconfig_path().display());
    println!("server: {}", h.url());
    std::io::stdout().flush()?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    h.shutdown().await?;
    Ok(())
}

fn tracing_subscriber_init() {}
