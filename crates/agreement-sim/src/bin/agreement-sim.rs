//! `agreement-sim`: prints the model's predicted one-phase agreement latency (Multikernel
//! §5.1, Figure 6) for every protocol and core count as `RESULT {json}` lines. Bad
//! arguments print the usage and exit 2.

use agreement_sim::cli::{self, Command, USAGE};
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Not `env::args`, which panics on an argument that is not UTF-8.
    let args: Option<Vec<String>> =
        std::env::args_os().skip(1).map(|a| a.into_string().ok()).collect();
    let Some(args) = args else {
        eprintln!("agreement-sim: an argument is not UTF-8\n{USAGE}");
        return ExitCode::from(2);
    };
    match cli::parse(&args) {
        Ok(Command::Help) => {
            let _ = writeln!(std::io::stdout(), "{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Command::Run(a)) => {
            let mut out = std::io::stdout().lock();
            for line in cli::result_lines(&a) {
                // A closed pipe (`| head`) ends the output; it is not an error to report.
                if writeln!(out, "{line}").is_err() {
                    return ExitCode::SUCCESS;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("agreement-sim: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
