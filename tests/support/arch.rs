//! The three static binaries the images ship (x86_64, arm64, armv7) and how
//! each runs on this x86_64 machine: natively, or under Debian's
//! qemu-user-static, called explicitly. binfmt_misc is not mounted here, and
//! registering handlers would change the kernel for everyone on the machine,
//! so nothing relies on it.

use super::control_plane::{ROOT, static_bin};
use super::{RunningAgent, run_to_end};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// One platform: its Rust target, its OCI platform, its emulator here.
#[derive(Debug)]
pub struct Arch {
    /// What the tests print: `x86_64`, `arm64`, `armv7`.
    pub label: &'static str,
    pub target: &'static str,
    /// OCI `architecture` / `variant` (Go's GOARCH / GOARM names).
    pub oci_arch: &'static str,
    pub oci_variant: Option<&'static str>,
    /// The qemu-user emulator, or `None` when it runs natively.
    pub qemu: Option<&'static str>,
    /// ELF `e_machine`.
    elf_machine: u16,
}

pub const X86_64: Arch = Arch {
    label: "x86_64",
    target: "x86_64-unknown-linux-musl",
    oci_arch: "amd64",
    oci_variant: None,
    qemu: None,
    elf_machine: 62,
};
pub const ARM64: Arch = Arch {
    label: "arm64",
    target: "aarch64-unknown-linux-musl",
    oci_arch: "arm64",
    oci_variant: None,
    qemu: Some("/usr/bin/qemu-aarch64-static"),
    elf_machine: 183,
};
pub const ARMV7: Arch = Arch {
    label: "armv7",
    target: "armv7-unknown-linux-musleabihf",
    oci_arch: "arm",
    oci_variant: Some("v7"),
    qemu: Some("/usr/bin/qemu-arm-static"),
    elf_machine: 40,
};
pub const ALL: [&Arch; 3] = [&X86_64, &ARM64, &ARMV7];

/// The budget of each stripped static binary.
pub const SIZE_BUDGET: u64 = 2 * 1024 * 1024;

impl Arch {
    /// The static release binary; fails (never skips) when it is missing or
    /// older than the sources, naming the command that builds it.
    pub fn bin(&self) -> PathBuf {
        if self.qemu.is_none() {
            return static_bin();
        }
        let how = format!("scripts/static-build.sh {}", self.target);
        let bin = Path::new(ROOT).join("target").join(self.target).join("release/opstatus");
        let built = std::fs::metadata(&bin)
            .and_then(|m| m.modified())
            .unwrap_or_else(|_| panic!("no binary at {}: run `{how}` (scripts/test.sh does)", bin.display()));
        let mut dirs = vec![Path::new(ROOT).join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    let changed = std::fs::metadata(&path).unwrap().modified().unwrap();
                    assert!(changed <= built, "{} is older than {}: run `{how}`", bin.display(), path.display());
                }
            }
        }
        bin
    }

    /// The emulator, checked to be there: a missing one fails the test.
    pub fn emulator(&self) -> Option<&'static Path> {
        self.qemu.map(|q| {
            let q = Path::new(q);
            assert!(q.exists(), "{} missing: run scripts/cross-setup.sh (scripts/test.sh does)", q.display());
            q
        })
    }

    /// The program and leading arguments that run `binary` on this machine.
    pub fn launcher(&self, binary: &Path) -> (PathBuf, Vec<String>) {
        match self.emulator() {
            Some(qemu) => (qemu.to_path_buf(), vec![binary.display().to_string()]),
            None => (binary.to_path_buf(), Vec::new()),
        }
    }

    fn argv<'a>(&self, leading: &'a [String], args: &[&'a str]) -> Vec<&'a str> {
        leading.iter().map(String::as_str).chain(args.iter().copied()).collect()
    }

    /// `support::run_to_end` for this architecture's binary.
    pub fn run_to_end(&self, args: &[&str], env: &[(String, String)], timeout: Duration) -> Output {
        let (program, leading) = self.launcher(&self.bin());
        run_to_end(&program, &self.argv(&leading, args), env, timeout)
    }

    /// `RunningAgent::start` for this architecture's binary. Under qemu-user
    /// the emulator is the process: its PID receives the signals (qemu
    /// delivers them to the guest) and its RSS includes the emulator's.
    pub fn start(&self, args: &[&str], env: &[(String, String)]) -> RunningAgent {
        let (program, leading) = self.launcher(&self.bin());
        RunningAgent::start(&program, &self.argv(&leading, args), env)
    }

    /// Asserts the binary is what the image needs: this architecture's ELF,
    /// statically linked (no program interpreter), within the size budget;
    /// for armv7, the hard-float EABI that armhf boards run.
    pub fn assert_static_within_budget(&self) -> u64 {
        let bin = self.bin();
        let bytes = std::fs::read(&bin).unwrap();
        let size = bytes.len() as u64;
        assert!(size <= SIZE_BUDGET, "{}: {size} bytes, over the 2 MiB budget ({SIZE_BUDGET})", bin.display());
        let elf = Elf::parse(&bytes).unwrap_or_else(|| panic!("{} is not an ELF file", bin.display()));
        assert_eq!(elf.machine, self.elf_machine, "{}: wrong architecture", bin.display());
        assert!(!elf.has_interpreter, "{}: dynamically linked (has PT_INTERP)", bin.display());
        if self.label == "armv7" {
            const EF_ARM_ABI_FLOAT_HARD: u32 = 0x400;
            assert!(elf.flags & EF_ARM_ABI_FLOAT_HARD != 0, "{}: not hard-float", bin.display());
        }
        size
    }
}

/// The few ELF facts the checks need (little-endian, 32 or 64 bit).
pub struct Elf {
    pub machine: u16,
    pub flags: u32,
    pub has_interpreter: bool,
    /// (name, file offset, size) of each section.
    pub sections: Vec<(String, usize, usize)>,
}

impl Elf {
    pub fn parse(b: &[u8]) -> Option<Elf> {
        if b.get(..4)? != b"\x7fELF" || b[5] != 1 {
            return None;
        }
        let u16_at = |o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
        let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
        let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
        let wide = b[4] == 2;
        let (phoff, flags, phentsize, phnum) = if wide {
            (u64_at(0x20)? as usize, u32_at(0x30)?, u16_at(0x36)?, u16_at(0x38)?)
        } else {
            (u32_at(0x1c)? as usize, u32_at(0x24)?, u16_at(0x2a)?, u16_at(0x2c)?)
        };
        const PT_INTERP: u32 = 3;
        let mut has_interpreter = false;
        for i in 0..phnum as usize {
            has_interpreter |= u32_at(phoff + i * phentsize as usize)? == PT_INTERP;
        }
        let (shoff, shentsize, shnum, shstrndx) = if wide {
            (u64_at(0x28)? as usize, u16_at(0x3a)? as usize, u16_at(0x3c)? as usize, u16_at(0x3e)? as usize)
        } else {
            (u32_at(0x20)? as usize, u16_at(0x2e)? as usize, u16_at(0x30)? as usize, u16_at(0x32)? as usize)
        };
        // Each section header: name (an offset into .shstrtab), offset, size.
        let header = |i: usize| -> Option<(usize, usize, usize)> {
            let at = shoff + i * shentsize;
            Some(if wide {
                (u32_at(at)? as usize, u64_at(at + 0x18)? as usize, u64_at(at + 0x20)? as usize)
            } else {
                (u32_at(at)? as usize, u32_at(at + 0x10)? as usize, u32_at(at + 0x14)? as usize)
            })
        };
        let (_, names_at, _) = header(shstrndx)?;
        let mut sections = Vec::new();
        for i in 0..shnum {
            let (name, offset, size) = header(i)?;
            let name = b.get(names_at + name..)?.split(|&c| c == 0).next()?;
            sections.push((String::from_utf8_lossy(name).into_owned(), offset, size));
        }
        Some(Elf { machine: u16_at(0x12)?, flags, has_interpreter, sections })
    }

    /// The bytes of section `name` of the file `b` this was parsed from.
    pub fn section<'a>(&self, b: &'a [u8], name: &str) -> Option<&'a [u8]> {
        let (_, offset, size) = self.sections.iter().find(|(n, _, _)| n == name)?;
        b.get(*offset..offset + size)
    }
}
