//! The help texts: `opstatus --help` (every command and flag) and each
//! command's own (`opstatus run --help`, `opstatus help get`): what it
//! does, the flags it reads, and an example.

use super::Command;
use super::flags::{FLAGS, Kind};

/// What `get` reads (its own flag first, then where to look and how to
/// connect), what `probe` reads (its own first) and what `prestop` reads
/// (where `run` listens); `run` and `once` read every other flag.
const GET: [&str; 6] =
    ["--extension-namespace", "--namespace", "--configmap", "--kubeconfig", "--context", "--service-account-dir"];
const PROBE: [&str; 2] = ["--max-age", "--ready-file"];
const PRESTOP: [&str; 1] = ["--listen"];

/// Whether `command` reads the flag `name`.
fn reads(command: &Command, name: &str) -> bool {
    match command {
        Command::Get { .. } => GET.contains(&name),
        Command::Probe => PROBE.contains(&name),
        Command::PreStop => PRESTOP.contains(&name),
        _ => name != GET[0] && name != PROBE[0],
    }
}

/// One command's usage, summary and example.
fn about(command: &Command) -> (&'static str, &'static str, &'static str) {
    match command {
        Command::Once => (
            "once",
            "Compute the status and write it once, leaving the publisher lock free; exit 0 on success, 1 on failure.",
            "opstatus once --kubeconfig ~/.kube/config --namespace kube9-system --operator-namespace my-operator",
        ),
        Command::Get { .. } => (
            "get",
            "Read the published status and interpret it as kube9's readers do: where the extension looks\n\
             (its setting, then kube9-system, then default), the mode it shows, and why.\n\
             -o, --output text|json    the interpretation as text (default) or JSON\n\
             -n NAMESPACE              --namespace, as kubectl spells it\n\
             On PATH as kubectl-opstatus, it is also `kubectl opstatus get`.",
            "opstatus get                          # as the extension finds it\n  \
             opstatus get -o json --namespace kube9-system\n  \
             kubectl opstatus get --context prod   # as a kubectl plugin",
        ),
        Command::Probe => (
            "probe",
            "Exec readiness probe: exit 0 when the readiness file that `run --ready-file` keeps is present\n\
             and fresh, 1 otherwise, with one line on stdout for kubelet's record.",
            "opstatus probe --ready-file /tmp/opstatus/ready --max-age 30s",
        ),
        Command::PreStop => (
            "prestop",
            "kubelet's preStop hook for the native sidecar: tells `opstatus run` in this pod (at --listen,\n\
             over 127.0.0.1) that the pod is stopping, so a publisher hands the status over to a replica that\n\
             stays before its operator is gone; exit 0 when it answered, 1 otherwise.",
            "opstatus prestop --listen :8090",
        ),
        _ => (
            "run",
            "Run the agent (the default command): write the status now, then once per interval and at once\n\
             when the health changes; keep the readiness file, endpoint and other sinks current.",
            "opstatus run --namespace kube9-system --operator-namespace my-operator \\\n      \
             --watch-url http://127.0.0.1:8081/healthz --listen 0.0.0.0:8080",
        ),
    }
}

/// The flags `command` reads (all of them for the global help), each with
/// its variable and default.
fn flags(command: Option<&Command>) -> String {
    let mut s = String::from("Flags (each also read from an environment variable; the flag wins):\n");
    for f in FLAGS.iter().filter(|f| command.is_none_or(|c| reads(c, f.name))) {
        let value = if matches!(f.kind, Kind::Switch(_)) { "" } else { " VALUE" };
        s.push_str(&format!(
            "  {}{value}\n      {}\n      [env: {}] [default: {}]\n",
            f.name,
            f.help,
            f.env,
            f.default.text()
        ));
    }
    s
}

const API_KEY: &str = "KUBE9_API_KEY (environment only, never a flag: command lines are visible on the node)\n      \
                       The kube9 API key when --api-key-file gives none; it is never logged or published.\n";

const FOOTER: &str = "Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error.\n\
                      Logs go to stderr; RUST_LOG sets the level (default info).\n";

/// The help for `command`, or for everything (`None`).
pub fn help_text(command: Option<&Command>) -> String {
    let Some(command) = command else { return global() };
    let (name, summary, example) = about(command);
    let mut s = format!("Usage: opstatus {name} [FLAGS]\n\n{summary}\n\n");
    s.push_str(&flags(Some(command)));
    s.push_str("  -h, --help\n      Print this help\n");
    if !matches!(command, Command::Get { .. } | Command::Probe | Command::PreStop) {
        s = s + "\n" + API_KEY;
    }
    s.push_str(&format!("\nExample:\n  {example}\n\n{FOOTER}"));
    s
}

fn global() -> String {
    let mut s = format!(
        "opstatus {} - publish a Kubernetes operator's health as the kube9 status ConfigMap\n\n\
         Usage: opstatus [COMMAND] [FLAGS]\n\n\
         Commands (`opstatus COMMAND --help` for one command's flags and an example):\n  \
           run        Run the agent: write the status now and every interval (default)\n  \
           once       Compute and write the status once; exit 0 on success, 1 on failure\n  \
           get        Read the published status and interpret it as kube9 readers do\n             \
                      (-o, --output text|json)\n  \
           probe      Exec readiness probe: exit 0 when --ready-file is fresh, 1 otherwise\n  \
           prestop    kubelet's preStop hook: tell `run` (at --listen) that the pod is stopping\n  \
           help       Print this help (`help COMMAND`: that command's)\n  \
           version    Print the version\n\n",
        env!("CARGO_PKG_VERSION")
    );
    s.push_str(&flags(None));
    s.push_str("  -h, --help       Print this help\n  -V, --version    Print the version\n\n");
    s + API_KEY + "\n" + FOOTER
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse;

    fn help_for(line: &str) -> String {
        let args: Vec<std::ffi::OsString> = line.split_whitespace().map(Into::into).collect();
        match parse(&args, &|_| None).unwrap().command {
            Command::Help(about) => help_text(about.as_deref()),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn each_command_has_its_own_help_with_its_flags_and_an_example() {
        let run = help_for("run --help");
        assert!(run.starts_with("Usage: opstatus run [FLAGS]"), "{run}");
        assert!(run.contains("  --interval VALUE") && run.contains("  --probe VALUE") && run.contains("Example:\n"));
        assert!(!run.contains("--extension-namespace") && !run.contains("--max-age"), "{run}");
        assert_eq!(help_for("--interval 2s --help"), help_text(None), "no command given: the global help");

        let get = help_for("get --help");
        assert_eq!(get, help_for("help get"), "help COMMAND is COMMAND --help");
        assert!(get.starts_with("Usage: opstatus get [FLAGS]") && get.contains("-o, --output text|json"), "{get}");
        assert!(get.contains("  --extension-namespace VALUE") && get.contains("  --kubeconfig VALUE"), "{get}");
        assert!(!get.contains("--interval") && !get.contains("KUBE9_API_KEY"), "{get}");
        assert!(get.contains("Example:\n  opstatus get"), "{get}");

        let probe = help_for("probe -h");
        assert!(probe.contains("  --ready-file VALUE") && probe.contains("  --max-age VALUE"), "{probe}");
        assert_eq!(probe.matches("\n  --").count(), 2, "probe reads two flags:\n{probe}");
        assert!(help_for("once --help").starts_with("Usage: opstatus once [FLAGS]"));
    }

    #[test]
    fn every_flag_is_read_by_some_command() {
        let commands = [Command::Run, Command::Get { output: crate::cli::OutputFormat::Text }, Command::Probe];
        for f in FLAGS {
            assert!(commands.iter().any(|c| reads(c, f.name)), "{} is read by no command", f.name);
        }
        for name in GET.iter().chain(&PROBE).chain(&PRESTOP) {
            assert!(FLAGS.iter().any(|f| f.name == *name), "{name} is no flag");
        }
    }

    #[test]
    fn help_for_no_command_is_refused_clearly() {
        let args = ["help".into(), "version".into()];
        let e = parse(&args, &|_| None).unwrap_err();
        assert!(e.to_string().contains("no help for \"version\""), "{e}");
    }
}
