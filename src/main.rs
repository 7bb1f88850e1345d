//! The `bundle-relay` command line.

use bundle_relay::budget::{Budget, BudgetInputs};
use bundle_relay::clock::Clock;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "bundle-relay", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the static memory budget: everything the process allocates at startup, one line
    /// per term. The relay never allocates beyond it.
    Budget {
        /// Request slots (the in-flight cap), over all threads.
        #[arg(long, default_value_t = 65_536)]
        slots: u64,
        /// Egress addresses in the pool.
        #[arg(long, default_value_t = 2_048)]
        addresses: u64,
        /// Block-engine regions each address sends to.
        #[arg(long, default_value_t = 8)]
        regions: u64,
        /// Reactor threads.
        #[arg(long, default_value_t = 2)]
        threads: u64,
    },
    /// Calibrate the clock the limiter runs on and say which source it uses.
    Clock,
}

fn main() {
    match Cli::parse().command {
        Command::Budget {
            slots,
            addresses,
            regions,
            threads,
        } => {
            let budget = Budget::new(BudgetInputs::with_default_intake(
                slots, addresses, regions, threads,
            ));
            println!("{budget}");
        }
        Command::Clock => println!("{}", Clock::calibrate()),
    }
}
