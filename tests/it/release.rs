//! What `scripts/release.sh` refuses, and what it publishes of its inputs,
//! shown with `--dry-run` (every check, nothing built) in a repository
//! holding the checkout's release scripts: credentials in
//! every remote form git takes, a `SOURCE_DATE_EPOCH` that is not a time, a
//! tree that differs from its commit in the ways `git status` does not
//! show, and a release without its image name or key. And the release key
//! the README names is the one `KEYS` holds. (The release itself is
//! checked by `scripts/release-check.sh`.)

use crate::support::TempDir;
use std::path::Path;
use std::process::{Command, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");
const IMAGE: &str = "registry.example/team/opstatus";

/// A gpg home with one signing key, its agent stopped when dropped.
struct Keyring {
    home: TempDir,
    fingerprint: String,
}

impl Keyring {
    fn new() -> Keyring {
        let home = TempDir::new("release-keyring");
        std::fs::set_permissions(home.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let gpg = |args: &[&str]| {
            let out = Command::new("gpg").args(args).env("GNUPGHOME", home.path()).stdin(Stdio::null()).output();
            let out = out.expect("gpg");
            assert!(out.status.success(), "gpg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        };
        gpg(&[
            "--batch",
            "--quiet",
            "--passphrase",
            "",
            "--quick-gen-key",
            "release test <t@opstatus.invalid>",
            "ed25519",
            "sign",
            "never",
        ]);
        let listed = gpg(&["--batch", "--with-colons", "--list-secret-keys"]);
        let fingerprint = listed.lines().find_map(|l| l.strip_prefix("fpr:::::::::")).unwrap().trim_end_matches(':');
        Keyring { fingerprint: fingerprint.to_string(), home }
    }
}

impl Drop for Keyring {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf").args(["--kill", "all"]).env("GNUPGHOME", self.home.path()).status();
    }
}

/// A repository holding what `release.sh --dry-run` reads of this one (its
/// release scripts, the crate's manifest and lock, KEYS, the README, one
/// source file and `.gitignore`), committed: a clean tree to release, small
/// enough that each test has its own (a clone of the whole repository
/// checks out thousands of files).
struct Checkout {
    dir: TempDir,
    keyring: Keyring,
}

/// What a run said: exit code, stdout, stderr.
struct Said {
    code: i32,
    out: String,
    err: String,
}

impl Checkout {
    fn new() -> Checkout {
        let dir = TempDir::new("release-checkout");
        for part in [
            "scripts/release.sh",
            "scripts/release",
            "Cargo.toml",
            "Cargo.lock",
            "KEYS",
            "README.md",
            ".gitignore",
            "src/main.rs",
            "build",
        ] {
            std::fs::create_dir_all(dir.path().join(part).parent().unwrap()).unwrap();
            let copied = Command::new("cp")
                .args(["-r", "-T"])
                .arg(Path::new(ROOT).join(part))
                .arg(dir.path().join(part))
                .status();
            assert!(copied.unwrap().success(), "{part}");
        }
        let checkout = Checkout { dir, keyring: Keyring::new() };
        checkout.git(&["init", "--quiet"]);
        checkout.git(&["remote", "add", "origin", ROOT]);
        checkout.git(&["add", "-A"]);
        checkout.git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@opstatus.invalid",
            "commit",
            "--quiet",
            "-m",
            "release",
        ]);
        checkout
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git").args(args).current_dir(self.path()).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn write(&self, path: &str, text: &str) {
        std::fs::write(self.path().join(path), text).unwrap();
    }

    /// `release.sh VERSION --dry-run ARGS` with the image and key set, then `env` on top
    /// (a value of None removes the variable).
    fn release(&self, args: &[&str], env: &[(&str, Option<&str>)]) -> Said {
        let mut c = Command::new(self.path().join("scripts/release.sh"));
        c.arg(VERSION).arg("--dry-run").args(args).current_dir(self.path()).stdin(Stdio::null());
        c.env_clear().envs(clean_env()).env("GNUPGHOME", self.keyring.home.path());
        c.env("OPSTATUS_IMAGE", IMAGE).env("OPSTATUS_SIGN_KEY", &self.keyring.fingerprint);
        for (k, v) in env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        let out = c.output().expect("scripts/release.sh");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Said { code: out.status.code().unwrap_or(-1), out: text(&out.stdout), err: text(&out.stderr) }
    }

    /// The value of `key: ` in a dry run's account.
    fn said(said: &Said, key: &str) -> String {
        let prefix = format!("{key}: ");
        let line = said.out.lines().find_map(|l| l.strip_prefix(&prefix));
        line.unwrap_or_else(|| panic!("no {key} in:\n{}\n{}", said.out, said.err)).to_string()
    }
}

/// A plain environment: HOME, and a PATH of the system's tools and this
/// build's cargo (none of a developer's SOURCE_DATE_EPOCH or OPSTATUS_*).
fn clean_env() -> Vec<(&'static str, String)> {
    let cargo = Path::new(env!("CARGO")).parent().unwrap().display().to_string();
    vec![("HOME", std::env::var("HOME").unwrap_or_default()), ("PATH", format!("{cargo}:/usr/bin:/bin"))]
}

/// `inputs.py source URL WHERE`: what it prints, or None when refused (exit 2).
fn source(url: &str) -> (Option<String>, String) {
    let out = Command::new(Path::new(ROOT).join("scripts/release/inputs.py"))
        .args(["source", url, "the origin remote's URL"])
        .env_clear()
        .envs(clean_env())
        .output()
        .expect("python3");
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim_end().to_string();
    match out.status.code() {
        Some(0) => (Some(text(&out.stdout)), text(&out.stderr)),
        Some(2) => (None, text(&out.stderr)),
        code => panic!("{url}: exit {code:?}: {}", text(&out.stderr)),
    }
}

const SECRET: &str = "s3cr3t-t0ken";

#[test]
fn no_credential_of_a_remote_is_published_in_any_form_git_takes() {
    let s = SECRET;
    // (a remote's URL, the address published: empty for a local repository, None = refused)
    let forms: &[(String, Option<&str>)] = &[
        (
            format!("https://user:{s}@git.example.org/team/opstatus.git"),
            Some("https://git.example.org/team/opstatus.git"),
        ),
        (
            format!("https::https://user:{s}@git.example.org/team/opstatus"),
            Some("https://git.example.org/team/opstatus"),
        ),
        (format!("persistent-https::https://{s}@git.example.org/o"), Some("https://git.example.org/o")),
        (
            format!("gcrypt::rsync://user:{s}@backup.example.org/repos/opstatus"),
            Some("rsync://backup.example.org/repos/opstatus"),
        ),
        (format!("gcrypt::{s}@git.example.org:opstatus"), Some("ssh://git.example.org/~/opstatus")),
        (format!("ssh://user:{s}@git.example.org:2222/opstatus.git"), Some("ssh://git.example.org:2222/opstatus.git")),
        (format!("git+ssh://{s}@git.example.org/opstatus.git"), Some("git+ssh://git.example.org/opstatus.git")),
        ("git@git.example.org:team/opstatus.git".into(), Some("ssh://git.example.org/~/team/opstatus.git")),
        ("git.example.org:/srv/opstatus.git".into(), Some("ssh://git.example.org/srv/opstatus.git")),
        (
            format!("https://git.example.org/team/opstatus.git?access_token={s}#x"),
            Some("https://git.example.org/team/opstatus.git"),
        ),
        ("HTTPS://git.example.org:8443/o".into(), Some("https://git.example.org:8443/o")),
        // Local repositories: no address.
        ("/srv/git/opstatus".into(), Some("")),
        ("../opstatus".into(), Some("")),
        ("file:///srv/git/opstatus".into(), Some("")),
        (format!("gcrypt::/srv/{s}"), Some("")),
        // A password holding a slash, a question mark or an `@`: host and path cannot be told apart.
        (format!("https://user:{s}/x@git.example.org/opstatus"), None),
        (format!("https://user:{s}?@git.example.org/opstatus"), None),
        (format!("user:{s}@git.example.org:opstatus.git"), None),
        (format!("https://git.example.org/o@{s}"), None),
        (format!("https://git.example.org/o {s}"), None),
        (format!("svn+ssh://user:{s}@svn.example.org/opstatus"), None),
    ];
    for (url, published) in forms {
        let (got, err) = source(url);
        assert_eq!(got.as_deref(), *published, "{url}: {err}");
        assert!(!format!("{got:?}{err}").contains(s), "{url}: the secret is in what it said: {got:?} {err}");
        if published.is_none() {
            assert!(err.contains("cannot publish its address without risking a credential"), "{url}: {err}");
        }
    }
}

#[test]
fn release_sh_cleans_or_refuses_the_remote_it_names_as_the_source() {
    let checkout = Checkout::new();
    let shows_no_secret = |said: &Said| !format!("{}{}", said.out, said.err).contains(SECRET);
    checkout.git(&[
        "remote",
        "set-url",
        "origin",
        &format!("https::https://user:{SECRET}@git.example.org/team/opstatus"),
    ]);
    let said = checkout.release(&[], &[]);
    assert_eq!((said.code, Checkout::said(&said, "source")), (0, "https://git.example.org/team/opstatus".into()));
    assert!(shows_no_secret(&said), "{}{}", said.out, said.err);
    checkout.git(&["remote", "set-url", "origin", &format!("user:{SECRET}@git.example.org:opstatus.git")]);
    let said = checkout.release(&[], &[]);
    assert_eq!(said.code, 2, "{}", said.err);
    assert!(said.err.contains("set OPSTATUS_SOURCE_URL"), "says what to do instead: {}", said.err);
    assert!(shows_no_secret(&said), "{}", said.err);
    // url.<base>.insteadOf rewrites the remote's URL with a token: the rewritten one is read, and cleaned.
    checkout.git(&["remote", "set-url", "origin", "https://git.example.org/team/opstatus.git"]);
    let rewrite = format!("url.https://ci:{SECRET}@git.example.org/.insteadOf");
    checkout.git(&["config", &rewrite, "https://git.example.org/"]);
    let said = checkout.release(&[], &[]);
    assert_eq!((said.code, Checkout::said(&said, "source")), (0, "https://git.example.org/team/opstatus.git".into()));
    assert!(shows_no_secret(&said), "{}{}", said.out, said.err);
    checkout.git(&["config", "--unset-all", &rewrite]);
    // OPSTATUS_SOURCE_URL is cleaned the same way; a local path is no address.
    let given = format!("https://me:{SECRET}@mirror.example.org/opstatus");
    let said = checkout.release(&[], &[("OPSTATUS_SOURCE_URL", Some(&given))]);
    assert_eq!((said.code, Checkout::said(&said, "source")), (0, "https://mirror.example.org/opstatus".into()));
    let said = checkout.release(&[], &[("OPSTATUS_SOURCE_URL", Some("/srv/git/opstatus"))]);
    assert_eq!(said.code, 2, "{}", said.err);
    assert!(said.err.contains("OPSTATUS_SOURCE_URL is a local path"), "{}", said.err);
    // An origin that is a local path: no source, said out loud.
    checkout.git(&["remote", "set-url", "origin", ROOT]);
    let said = checkout.release(&[], &[]);
    assert_eq!((said.code, Checkout::said(&said, "source")), (0, "(none)".into()), "{}", said.err);
    assert!(said.err.contains("the origin remote is a local path"), "{}", said.err);
}

#[test]
fn a_source_date_epoch_that_is_not_a_time_is_refused() {
    let checkout = Checkout::new();
    for (value, says) in [
        ("-1", "not a time"),
        ("1.5", "not a time"),
        ("1732000000 ", "not a time"),
        ("0x6700", "not a time"),
        ("017", "not a time"),
        ("yesterday", "not a time"),
        ("99999999999", "(5138-11-16T09:46:39Z), later than now"),
        ("99999999999999999999", "not a time"),
    ] {
        let said = checkout.release(&[], &[("SOURCE_DATE_EPOCH", Some(value))]);
        assert_eq!(said.code, 2, "SOURCE_DATE_EPOCH={value:?}: {}", said.err);
        assert!(said.err.contains("release.sh: SOURCE_DATE_EPOCH is "), "{}", said.err);
        assert!(said.err.contains(says), "SOURCE_DATE_EPOCH={value:?}: {}", said.err);
    }
    let said = checkout.release(&[], &[("SOURCE_DATE_EPOCH", Some("1732000000"))]);
    assert_eq!(said.code, 0, "{}", said.err);
    assert_eq!(Checkout::said(&said, "SOURCE_DATE_EPOCH"), "1732000000 (2024-11-19T07:06:40Z)");
    // Unset (or empty): the commit's time.
    let commit_time = checkout.git(&["log", "-1", "--format=%ct"]);
    for env in [None, Some("")] {
        let said = checkout.release(&[], &[("SOURCE_DATE_EPOCH", env)]);
        assert_eq!(said.code, 0, "{}", said.err);
        assert!(Checkout::said(&said, "SOURCE_DATE_EPOCH").starts_with(&format!("{} (", commit_time.trim())));
    }
}

#[test]
fn the_tree_built_is_judged_against_the_commit_not_git_status() {
    let checkout = Checkout::new();
    let commit_tree = checkout.git(&["rev-parse", "HEAD^{tree}"]).trim().to_string();
    let clean = checkout.release(&[], &[]);
    assert_eq!(clean.code, 0, "{}", clean.err);
    assert_eq!(Checkout::said(&clean, "uncommitted changes"), "false");
    assert_eq!(Checkout::said(&clean, "tree"), commit_tree);

    // (what hides it, what is changed, how; undone after)
    type Step = Box<dyn Fn(&Checkout)>;
    let cases: Vec<(&str, &str, Step, Step)> = vec![
        (
            "assume-unchanged",
            "README.md",
            Box::new(|c| {
                c.git(&["update-index", "--assume-unchanged", "README.md"]);
                c.write("README.md", "changed\n");
            }),
            Box::new(|c| {
                c.git(&["update-index", "--no-assume-unchanged", "README.md"]);
            }),
        ),
        (
            "skip-worktree",
            "src/main.rs",
            Box::new(|c| {
                c.git(&["update-index", "--skip-worktree", "src/main.rs"]);
                c.write("src/main.rs", "fn main() {}\n");
            }),
            Box::new(|c| {
                c.git(&["update-index", "--no-skip-worktree", "src/main.rs"]);
            }),
        ),
        (
            "status.showUntrackedFiles=no",
            "src/hidden.rs",
            Box::new(|c| {
                c.git(&["config", "status.showUntrackedFiles", "no"]);
                c.write("src/hidden.rs", "// built\n");
            }),
            Box::new(|c| {
                c.git(&["config", "--unset", "status.showUntrackedFiles"]);
            }),
        ),
        (
            ".git/info/exclude",
            "build/extra.ld",
            Box::new(|c| {
                c.write(".git/info/exclude", "extra.ld\n");
                c.write("build/extra.ld", "/* read by a build */\n");
            }),
            Box::new(|c| c.write(".git/info/exclude", "")),
        ),
        (
            "core.fileMode=false",
            "README.md",
            Box::new(|c| {
                c.git(&["config", "core.fileMode", "false"]);
                let path = c.path().join("README.md");
                std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
            }),
            Box::new(|c| {
                c.git(&["config", "--unset", "core.fileMode"]);
            }),
        ),
    ];
    for (hidden_by, path, change, undo) in cases {
        change(&checkout);
        let status = checkout.git(&["status", "--porcelain"]);
        assert_eq!(status, "", "{hidden_by}: git status shows it, so this case proves nothing");
        let refused = checkout.release(&[], &[]);
        assert_eq!(refused.code, 2, "{hidden_by}: not refused:\n{}\n{}", refused.out, refused.err);
        assert!(refused.err.contains("differ from commit"), "{hidden_by}: {}", refused.err);
        assert!(refused.err.lines().any(|l| l.trim().ends_with(path)), "{hidden_by}: names {path}: {}", refused.err);
        let allowed = checkout.release(&["--allow-dirty"], &[]);
        assert_eq!(allowed.code, 0, "{hidden_by}: {}", allowed.err);
        assert_eq!(Checkout::said(&allowed, "uncommitted changes"), "true", "{hidden_by}");
        assert_ne!(Checkout::said(&allowed, "tree"), commit_tree, "{hidden_by}");
        undo(&checkout);
        let _ = std::fs::remove_file(checkout.path().join(path));
        checkout.git(&["checkout", "--quiet", "HEAD", "--", "."]);
    }
    let again = checkout.release(&[], &[]);
    assert_eq!((again.code, Checkout::said(&again, "tree")), (0, commit_tree), "{}", again.err);
}

#[test]
fn a_release_without_its_image_name_or_key_is_refused() {
    let checkout = Checkout::new();
    let other = Keyring::new();
    for (env, says) in [
        (("OPSTATUS_IMAGE", None), "OPSTATUS_IMAGE is not set"),
        (("OPSTATUS_IMAGE", Some("opstatus")), "is not an image name with its registry"),
        (("OPSTATUS_IMAGE", Some("registry.example/team/opstatus:0.1.0")), "has a tag or digest"),
        (("OPSTATUS_IMAGE", Some("Registry.example/Team/opstatus")), "is not an image name"),
        (("OPSTATUS_SIGN_KEY", None), "OPSTATUS_SIGN_KEY is not set"),
        (("OPSTATUS_SIGN_KEY", Some("opstatus release")), "is not a key's full fingerprint"),
        (("OPSTATUS_SIGN_KEY", Some(other.fingerprint.as_str())), "gpg has no secret key"),
    ] {
        let said = checkout.release(&[], &[env]);
        assert_eq!(said.code, 2, "{env:?}: {}", said.err);
        assert!(said.err.contains(says), "{env:?}: {}", said.err);
    }
    let said = checkout.release(&[], &[]);
    assert_eq!(said.code, 0, "{}", said.err);
    assert_eq!(Checkout::said(&said, "image"), format!("{IMAGE}:{VERSION}"));
    // A key KEYS does not hold is said out loud (users could not verify the release).
    assert!(said.err.contains("is not in KEYS"), "{}", said.err);
}

/// The README's release key: its fingerprint, or None when it says none is published.
fn readme_release_key() -> Option<String> {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let line = readme.split("**Release key:**").nth(1).expect("the README's Releases section names the release key");
    let line = line.split("\n\n").next().unwrap();
    if line.trim_start().starts_with("none published yet") {
        return None;
    }
    let hex: String = line.split('`').nth(1).expect("the fingerprint in backquotes").replace(' ', "");
    assert!(hex.len() == 40 && hex.chars().all(|c| c.is_ascii_hexdigit()), "not a fingerprint: {hex}");
    Some(hex.to_uppercase())
}

#[test]
fn the_readme_names_the_release_key_that_keys_holds() {
    let home = TempDir::new("release-keys");
    let out = Command::new("gpg")
        .args(["--batch", "--with-colons", "--show-keys"])
        .arg(Path::new(ROOT).join("KEYS"))
        .env("GNUPGHOME", home.path())
        .output()
        .expect("gpg");
    let text = String::from_utf8_lossy(&out.stdout);
    let keys: Vec<&str> =
        text.lines().filter_map(|l| l.strip_prefix("fpr:::::::::")).map(|f| f.trim_end_matches(':')).collect();
    match readme_release_key() {
        None => assert!(keys.is_empty(), "KEYS holds keys {keys:?}, and the README says none is published"),
        Some(key) => assert!(keys.contains(&key.as_str()), "the README's release key {key} is not in KEYS ({keys:?})"),
    }
}
