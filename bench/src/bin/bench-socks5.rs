//! bench-socks5: a SOCKS5 proxy on loopback for the relay's SOCKS5 egress tests and demos.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bundle_relay_bench::socks5::{ProxyConfig, Socks5Proxy};
use clap::Parser;

#[derive(Parser)]
#[command(about = "SOCKS5 CONNECT proxy (no-auth or username/password) that relays bytes")]
struct Args {
    /// Address to listen on (port 0: any; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:1080")]
    listen: SocketAddr,
    /// Require username/password authentication with this username (needs --pass).
    #[arg(long, requires = "pass")]
    user: Option<String>,
    #[arg(long, requires = "user")]
    pass: Option<String>,
    /// Refuse every CONNECT with this reply code (default 2, "not allowed by ruleset").
    #[arg(long, num_args = 0..=1, default_missing_value = "2")]
    refuse: Option<u8>,
    /// Close each connection after its greeting, without a reply.
    #[arg(long)]
    close_mid_handshake: bool,
    /// Source address for outbound connections.
    #[arg(long)]
    outbound_source: Option<IpAddr>,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long)]
    duration_s: Option<u64>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a = Args::parse();
    let cfg = ProxyConfig {
        listen: a.listen,
        auth: a.user.zip(a.pass),
        refuse: a.refuse,
        close_mid_handshake: a.close_mid_handshake,
        outbound_source: a.outbound_source,
    };
    let proxy = match Socks5Proxy::start(cfg).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bench-socks5: {e}");
            std::process::exit(1);
        }
    };
    // On stdout, one line, so a parent process can learn an ephemeral port.
    println!("listening on {}", proxy.local_addr());
    let mut seen = 0;
    let mut elapsed_s = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        elapsed_s += 1;
        let sessions = proxy.sessions();
        for s in &sessions[seen..] {
            eprintln!(
                "bench-socks5: client {} target {} via {} {}",
                s.client,
                s.target.map_or("-".into(), |t| t.to_string()),
                s.outbound_local.map_or("-".into(), |t| t.to_string()),
                s.outcome
            );
        }
        seen = sessions.len();
        if a.duration_s.is_some_and(|d| elapsed_s >= d) {
            break;
        }
    }
    proxy.shutdown().await;
}
