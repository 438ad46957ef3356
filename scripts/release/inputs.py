#!/usr/bin/env python3
"""What a release is made from, checked before anything is built
(scripts/release.sh). Each command prints the value to use, or says on
stderr why the input is refused and exits 2; nothing it prints carries
a user name, password or token it was given.

  inputs.py epoch VALUE WHERE HINT
                                  SOURCE_DATE_EPOCH: whole seconds since 1970, not after now
                                  (WHERE names the value's origin in the error, HINT ends it)
  inputs.py image NAME            the image's published name: registry/path/name, no tag or digest
  inputs.py source URL WHERE      the address to publish for a repository URL in any form git
                                  takes, without credentials, query or fragment; empty for a
                                  local repository (a path, file://)
  inputs.py tree                  the tree of the files a build in this checkout reads (tracked
                                  files as they are on disk, whatever the index says, and
                                  untracked ones but those the repository's .gitignore files
                                  ignore), written into the object store; prints its id

Standard library only.
"""
import datetime
import os
import re
import stat
import subprocess
import sys
import time

# ustar's largest modification time (eleven octal digits): the archives' entries carry it.
LATEST_TAR_TIME = 8**11 - 1


class Refused(Exception):
    pass


def epoch(value, where, hint="", now=None):
    """SOURCE_DATE_EPOCH as the reproducible-builds specification has it:
    an integer as `date +%s` prints it; here also not after now (the image
    would be created in the future) and within what ustar stores."""
    now = int(time.time()) if now is None else now
    if not re.fullmatch(r"0|[1-9][0-9]{0,11}", value):
        raise Refused(
            f"{where} is {value[:40]!r}, not a time: whole seconds since 1970-01-01 UTC, as `date +%s` prints them"
            f"{hint}"
        )
    seconds = int(value)
    if seconds > now or seconds > LATEST_TAR_TIME:
        try:
            when = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        except (OverflowError, ValueError, OSError):
            when = "after the year 9999"
        raise Refused(f"{where} is {value} ({when}), later than now: a release is not made in the future{hint}")
    return seconds


DOMAIN = r"(?:localhost|(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+)(?::[0-9]{1,5})?"
PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"


def image(name):
    """A fully qualified repository name (a registry host, then the path),
    as a policy.json scope and a signature's identity need it."""
    if re.fullmatch(rf"{DOMAIN}(?:/{PATH_COMPONENT})+", name) and len(name) <= 255:
        return name
    if re.fullmatch(rf"{DOMAIN}(?:/{PATH_COMPONENT})+(?::[\w][\w.-]{{0,127}}|@sha256:[0-9a-f]{{64}})", name):
        raise Refused(f"OPSTATUS_IMAGE={name} has a tag or digest: give the name alone (the release adds the version)")
    raise Refused(
        f"OPSTATUS_IMAGE={name!r} is not an image name with its registry: registry.example/team/opstatus "
        "(a registry host, then a lowercase path)"
    )


SCHEMES = ("https", "http", "ssh", "git", "git+ssh", "ssh+git", "rsync", "ftp", "ftps")
HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"


def clean_path(path):
    path = re.split(r"[?#]", path, maxsplit=1)[0]
    if "@" in path or re.search(r"[\s\x00-\x1f\x7f]", path):
        raise Refused("its path holds `@` or a blank")
    return path


def source(url):
    """The address to publish for a git URL (None for a local repository).
    Handles `helper::address` (https::, gcrypt::, persistent-https::),
    scheme://[user[:password]@]host[:port]/path?query#fragment and
    scp-like [user@]host:path; refuses anything it cannot reduce to a
    host and a path, rather than publish part of a credential."""
    url = url.strip()
    helper = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*)::(.*)", url, re.S)
    if helper:
        return source(helper.group(2))
    scheme = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", url, re.S)
    if scheme:
        name, rest = scheme.group(1).lower(), scheme.group(2)
        if name == "file":
            return None
        if name not in SCHEMES:
            raise Refused(f"a {name}:// address is not one it publishes ({', '.join(SCHEMES)})")
        authority, path = re.match(r"([^/?#]*)(.*)", rest, re.S).groups()
        host = authority.rpartition("@")[2]
        if not re.fullmatch(rf"{HOST}(?::[0-9]{{1,5}})?", host):
            raise Refused("its host is not a host name")
        return f"{name}://{host}{clean_path(path)}"
    colon, slash = url.find(":"), url.find("/")
    if colon > 0 and (slash < 0 or colon < slash):
        # scp-like [user@]host:path (git's rule: a colon before any slash).
        login, path = url[:colon], url[colon + 1 :]
        host = login.rpartition("@")[2]
        if not re.fullmatch(HOST, host) or not path:
            raise Refused("its host is not a host name")
        path = clean_path(path)
        return f"ssh://{host}{path}" if path.startswith("/") else f"ssh://{host}/~/{path}"
    return None


def tree():
    """Hashes what a build here reads and writes it as a tree object: every
    tracked path as it is on disk (assume-unchanged and skip-worktree
    entries too: the index's word is not taken; a missing one is left out)
    and every untracked file but those ignored by the repository's own
    .gitignore files (not .git/info/exclude or a global excludes file,
    which hide files from `git status` that a build still reads). Contents
    are hashed without filters, modes and symlinks read from the disk."""

    def git(*args, data=None, env=None):
        return subprocess.run(["git", *args], input=data, env=env, check=True, stdout=subprocess.PIPE).stdout

    tracked = git("ls-files", "-z", "--cached").split(b"\0")
    untracked = git("ls-files", "-z", "--others", "--exclude-per-directory=.gitignore").split(b"\0")
    paths = sorted({p for p in tracked + untracked if p})
    files, links = [], []
    for path in paths:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if b"\n" in path:
            raise Refused(f"{path!r} has a newline in its name")
        if stat.S_ISLNK(st.st_mode):
            links.append(path)
        elif stat.S_ISREG(st.st_mode):
            files.append((path, "100755" if st.st_mode & stat.S_IXUSR else "100644"))
        # A directory where a file was tracked (or a submodule) is read through its own files.
    blobs = git("hash-object", "-w", "--no-filters", "--stdin-paths", data=b"".join(p + b"\n" for p, _ in files))
    entries = [f"{mode} {blob}\t".encode() + path for (path, mode), blob in zip(files, blobs.decode().split())]
    for path in links:
        blob = git("hash-object", "-w", "--stdin", data=os.fsencode(os.readlink(path))).decode().strip()
        entries.append(f"120000 {blob}\t".encode() + path)
    index = os.path.join(git("rev-parse", "--absolute-git-dir").decode().strip(), f"release-index-{os.getpid()}")
    env = dict(os.environ, GIT_INDEX_FILE=index)
    try:
        git("update-index", "-z", "--index-info", data=b"".join(e + b"\0" for e in entries), env=env)
        return git("write-tree", env=env).decode().strip()
    finally:
        if os.path.exists(index):
            os.remove(index)


def main(argv):
    command, args = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    try:
        if command == "epoch" and len(args) == 3:
            print(epoch(*args))
        elif command == "image" and len(args) == 1:
            print(image(args[0]))
        elif command == "source" and len(args) == 2:
            try:
                print(source(args[0]) or "")
            except Refused as e:
                raise Refused(f"{args[1]}: cannot publish its address without risking a credential: {e}") from None
        elif command == "tree" and not args:
            print(tree())
        else:
            sys.exit(__doc__)
    except Refused as e:
        print(f"release.sh: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
