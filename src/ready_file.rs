//! The readiness file: present and fresh while opstatus is ready, for exec
//! probes in images without a shell (`opstatus probe`).
//!
//! The file holds one line, `health=healthy time=2025-11-10T15:30:00Z`. It is
//! rewritten atomically (write aside to a fresh, unguessable name, then
//! rename) on every check tick while
//! the health is not `unhealthy`, removed when it becomes `unhealthy` and at
//! exit. [`check`] is the probe's verdict, pure: contents and clock in.

use crate::status::Health;
use crate::util::time::{format_rfc3339, parse_rfc3339};
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub(crate) fn render(health: Health, now: SystemTime) -> String {
    format!("health={} time={}\n", health.as_str(), format_rfc3339(now))
}

/// Writes the file atomically: a reader sees the old or the new contents,
/// never a partial line.
///
/// The contents are written aside, to a new file whose name nobody can
/// guess (random, from the OS), created exclusively: `O_EXCL` fails on any
/// existing name, a symbolic link included, so a link planted in the
/// directory never redirects the write to a file of the attacker's choice.
pub(crate) fn write(path: &Path, health: Health, now: SystemTime) -> io::Result<()> {
    let aside = aside_name(path, random_u64()?);
    let mut file = OpenOptions::new().write(true).create_new(true).open(&aside)?;
    // From here on the aside file is ours: remove it if anything fails.
    let written = file.write_all(render(health, now).as_bytes()).and_then(|()| std::fs::rename(&aside, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    written
}

/// `DIR/.NAME.<16 hex digits>.tmp`: beside the file (a rename does not
/// cross file systems), hidden, and unpredictable.
fn aside_name(path: &Path, random: u64) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{random:016x}.tmp"))
}

fn random_u64() -> io::Result<u64> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 8];
    ring::rand::SystemRandom::new().fill(&mut bytes).map_err(|_| io::Error::other("the OS random source failed"))?;
    Ok(u64::from_le_bytes(bytes))
}

/// Removes the file; a missing file is fine.
pub(crate) fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The probe's verdict on the file's contents (`None`: no file): `Ok` with a
/// line saying why it is ready, or `Err` with a line saying why not.
pub(crate) fn check(path: &Path, contents: Option<&str>, now: SystemTime, max_age: Duration) -> Result<String, String> {
    let shown = path.display();
    let Some(contents) = contents else {
        return Err(format!("not ready: no readiness file {shown} (opstatus is unhealthy, starting or not running)"));
    };
    let field =
        |name: &str| contents.split_whitespace().find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')));
    let (Some(health), Some(time)) = (field("health"), field("time").and_then(parse_rfc3339)) else {
        return Err(format!("not ready: {shown} is not an opstatus readiness file"));
    };
    let age = now.duration_since(time).unwrap_or(Duration::ZERO);
    if age > max_age {
        return Err(format!(
            "not ready: {shown} was written {}s ago (max {}s): opstatus has stopped updating it",
            age.as_secs(),
            max_age.as_secs()
        ));
    }
    if health == Health::Unhealthy.as_str() {
        return Err(format!("not ready: {shown} says health=unhealthy"));
    }
    Ok(format!("ready: health={health}, written {}s ago", age.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    const MAX: Duration = Duration::from_secs(30);

    #[test]
    fn fresh_file_is_ready() {
        let contents = render(Health::Degraded, at(1000));
        assert_eq!(contents, "health=degraded time=1970-01-01T00:16:40Z\n");
        assert_eq!(
            check(Path::new("/r"), Some(&contents), at(1010), MAX),
            Ok("ready: health=degraded, written 10s ago".into())
        );
        assert_eq!(
            check(Path::new("/r"), Some(&contents), at(1030), MAX),
            Ok("ready: health=degraded, written 30s ago".into())
        );
        // A clock that went backwards is not a reason to fail the pod.
        assert!(check(Path::new("/r"), Some(&contents), at(900), MAX).is_ok());
    }

    #[test]
    fn missing_stale_garbage_or_unhealthy_is_not_ready() {
        let p = Path::new("/run/ready");
        assert_eq!(
            check(p, None, at(0), MAX),
            Err("not ready: no readiness file /run/ready (opstatus is unhealthy, starting or not running)".into())
        );
        assert_eq!(
            check(p, Some(&render(Health::Healthy, at(1000))), at(1031), MAX),
            Err("not ready: /run/ready was written 31s ago (max 30s): opstatus has stopped updating it".into())
        );
        for garbage in ["", "ready", "health=healthy", "time=1970-01-01T00:16:40Z", "health=healthy time=yesterday"] {
            assert_eq!(
                check(p, Some(garbage), at(1000), MAX),
                Err("not ready: /run/ready is not an opstatus readiness file".into()),
                "{garbage:?}"
            );
        }
        assert_eq!(
            check(p, Some(&render(Health::Unhealthy, at(1000))), at(1000), MAX),
            Err("not ready: /run/ready says health=unhealthy".into())
        );
    }

    #[test]
    fn write_replaces_atomically_and_remove_tolerates_absence() {
        let dir = std::env::temp_dir().join(format!("opstatus-ready-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ready");
        write(&path, Health::Healthy, at(1)).unwrap();
        write(&path, Health::Degraded, at(2)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), render(Health::Degraded, at(2)));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left behind");
        remove(&path).unwrap();
        remove(&path).unwrap();
        assert!(!path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn planted_links_do_not_redirect_the_write() {
        let dir = std::env::temp_dir().join(format!("opstatus-ready-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let path = dir.join("ready");
        // The old fixed temporary name, and names a guesser would try.
        let planted = [dir.join("ready.tmp"), aside_name(&path, 0), aside_name(&path, 1), aside_name(&path, u64::MAX)];
        for link in &planted {
            std::os::unix::fs::symlink(&victim, link).unwrap();
        }
        for tick in 0..20 {
            write(&path, Health::Healthy, at(tick)).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "the planted link was followed");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), render(Health::Healthy, at(19)));
        assert!(!std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
        // Nothing left behind but the file, the victim and the planted links.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2 + planted.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_aside_name_is_hidden_beside_the_file_and_differs_each_time() {
        assert_eq!(aside_name(Path::new("/run/ready"), 0xab), Path::new("/run/.ready.00000000000000ab.tmp"));
        let names: std::collections::HashSet<_> = (0..16).map(|_| random_u64().unwrap()).collect();
        assert_eq!(names.len(), 16, "random names repeat");
    }
}
