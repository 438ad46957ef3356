//! `opstatus`: parse the command line, dispatch, map errors to exit codes
//! (0 success, 1 runtime failure, 2 usage or configuration).

#![forbid(unsafe_code)]

use opstatus::app::{self, Failure};
use opstatus::cli::{self, Command};
use std::process::ExitCode;

// See README "Dependencies": musl's allocator unmaps freed pages at once,
// so every heartbeat mapped, faulted in and unmapped rustls's record buffers
// again; dlmalloc keeps freed memory (trimmed only past 2 MiB free).
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let env = |name: &str| std::env::var(name).ok();
    let invocation = match cli::parse(&args, &env) {
        Ok(inv) => inv,
        Err(e) => return fail(&Failure::Config(e.to_string())),
    };
    opstatus::logging::init();
    let settings = &invocation.settings;
    let result = match invocation.command {
        Command::Help(about) => {
            print!("{}", cli::help_text(about.as_deref()));
            Ok(())
        }
        Command::Version => {
            println!("opstatus {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Command::Run => app::run(settings, &env),
        Command::Once => app::once(settings, &env),
        Command::Get { output } => app::get(settings, output, &env).map(|text| print!("{text}")),
        Command::Probe => app::probe(settings).map(|line| print!("{line}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn fail(e: &Failure) -> ExitCode {
    match e {
        Failure::NotReady(line) => println!("{line}"),
        _ => eprintln!("opstatus: error: {e}"),
    }
    ExitCode::from(e.exit_code() as u8)
}
