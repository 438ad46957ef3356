//! `opstatus`: parse the command line, dispatch, map errors to exit codes
//! (0 success, 1 runtime failure, 2 usage or configuration).

#![forbid(unsafe_code)]

use opstatus::app::{self, Failure};
use opstatus::cli::{self, Command};
use std::io::Write;
use std::process::ExitCode;

// See README "Dependencies": musl's allocator unmaps freed pages at once,
// so every heartbeat mapped, faulted in and unmapped rustls's record buffers
// again; dlmalloc keeps freed memory (trimmed only past 2 MiB free).
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

fn main() -> ExitCode {
    // As the system gives them: `std::env::args` and `var` would panic on,
    // or drop, a value that is not UTF-8 (a path need not be).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let env = |name: &str| std::env::var_os(name);
    let invocation = match cli::parse(&args, &env) {
        Ok(inv) => inv,
        Err(e) => return fail(&Failure::Config(e.to_string())),
    };
    opstatus::logging::init();
    let settings = &invocation.settings;
    let result = match invocation.command {
        Command::Help(about) => Ok(cli::help_text(about.as_deref())),
        Command::Version => Ok(format!("opstatus {}\n", env!("CARGO_PKG_VERSION"))),
        Command::Run => app::run(settings, &env).map(|()| String::new()),
        Command::Once => app::once(settings, &env).map(|()| String::new()),
        Command::Get { output } => app::get(settings, output, &env),
        Command::Probe => app::probe(settings),
        Command::PreStop => app::prestop(settings),
    };
    match result {
        Ok(text) => match print_out(&text) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "opstatus: error: cannot write the output: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => fail(&e),
    }
}

/// Writes a command's output. A reader that went away (`opstatus get |
/// head`, `--help | true`: a broken pipe) is no failure of the command:
/// the output ends there, quietly, and the command's own exit code stands
/// (`print!` would panic). Any other write error is one.
fn print_out(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written,
    }
}

fn fail(e: &Failure) -> ExitCode {
    match e {
        Failure::NotReady(line) => drop(print_out(&format!("{line}\n"))),
        // stderr closed too: the exit code still says what happened.
        _ => drop(writeln!(std::io::stderr(), "opstatus: error: {e}")),
    }
    ExitCode::from(e.exit_code() as u8)
}
