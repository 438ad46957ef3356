//! How many TCP connections a process holds open to a port on loopback,
//! from Linux's `/proc`: its descriptors' socket inodes matched against the
//! established connections in `/proc/net/tcp` and `tcp6`.

use std::collections::HashSet;

/// Established connections process `pid` holds to `port` (the remote end).
pub fn connections_to(pid: u32, port: u16) -> usize {
    let mut inodes = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let Some(remote_port) = fields.get(2).and_then(|r| r.rsplit(':').next()) else { continue };
            if u16::from_str_radix(remote_port, 16) == Ok(port) && fields.get(3) == Some(&"01") {
                inodes.insert(format!("socket:[{}]", fields[9]));
            }
        }
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|link| inodes.contains(link.to_string_lossy().as_ref()))
        .count()
}
