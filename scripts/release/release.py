#!/usr/bin/env python3
"""The documents of a release that scripts/release.sh writes, from what it
built: kept apart from the shell so that each is plain, sorted, stable JSON
(two runs from one commit write the same bytes).

  release.py dep-v0 BINARY                 the binary's cargo-auditable list (.dep-v0), as JSON
  release.py sbom TARGET VERSION SDE ARTIFACTS
                                           CycloneDX 1.5 JSON of what is compiled into TARGET's binary
                                           (ARTIFACTS: that build's `cargo build --message-format=json`)
  release.py compare SBOM BINARY           exit 1 unless the SBOM lists exactly the binary's runtime crates
  release.py provenance FACTS.json         the in-toto statement (SLSA provenance v1)

Standard library only: it runs where cargo and python3 are, nothing to install.
"""
import datetime
import hashlib
import json
import struct
import subprocess
import sys
import tomllib
import uuid
import zlib


def dump(value):
    """Stable JSON: sorted keys, two-space indent, one trailing newline."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def elf_section(path, wanted):
    """The bytes of the ELF section `wanted` (32- or 64-bit, little-endian)."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[5] != 1:
        sys.exit(f"{path}: not a little-endian ELF file")
    wide = data[4] == 2
    if wide:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    else:
        shoff, = struct.unpack_from("<I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x2E)

    def header(i):
        at = shoff + i * shentsize
        if wide:
            name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, at)
        else:
            name, _, _, _, offset, size = struct.unpack_from("<IIIIII", data, at)
        return name, offset, size

    _, names_at, _ = header(shstrndx)
    for i in range(shnum):
        name, offset, size = header(i)
        end = data.index(b"\0", names_at + name)
        if data[names_at + name:end].decode() == wanted:
            return data[offset:offset + size]
    sys.exit(f"{path}: no {wanted} section (build it with `cargo auditable build`: scripts/static-build.sh)")


def dep_v0(path):
    return json.loads(zlib.decompress(elf_section(path, ".dep-v0")))


def runtime_crates(path):
    """(name, version) of what the binary's own list says runs in it: not
    its build-time crates (build scripts, proc-macros)."""
    return sorted((p["name"], p["version"]) for p in dep_v0(path)["packages"] if p.get("kind", "runtime") == "runtime")


def metadata(target):
    out = subprocess.run(
        ["cargo", "metadata", "--locked", "--format-version", "1", "--filter-platform", target],
        check=True, stdout=subprocess.PIPE,
    ).stdout
    return json.loads(out)


def compiled_in(meta, target, artifacts):
    """The packages compiled for `target` and linked into the binary, as
    the build itself reported them (`cargo build --message-format=json`,
    fresh units included): the library units built for the target, not
    build scripts, proc-macros or their dependencies, which are built for
    the host (target/release/, not target/TARGET/). Their edges come from
    the resolve graph, kept to those packages (cargo metadata resolves
    features as if every weak `dep?/feature` were on, so its graph names a
    few crates the build never compiles)."""
    packages = {p["id"]: p for p in meta["packages"]}
    built = set()
    for line in open(artifacts):
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact":
            continue
        if not any(k in ("lib", "rlib", "bin") for k in message["target"]["kind"]):
            continue
        if all(f"/{target}/" in f for f in message["filenames"]):
            built.add(message["package_id"])
    root = meta["resolve"]["root"]
    if root not in built:
        sys.exit(f"{artifacts}: no {target} build of the binary in it")
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    edges = {pid: sorted(d["pkg"] for d in nodes[pid]["deps"] if d["pkg"] in built) for pid in built}
    return root, packages, edges


def purl(package):
    return f"pkg:cargo/{package['name']}@{package['version']}"


def lock_checksums():
    """name@version → the sha256 Cargo.lock records for the .crate file."""
    lock = tomllib.load(open("Cargo.lock", "rb"))
    return {f"{p['name']}@{p['version']}": p["checksum"] for p in lock["package"] if "checksum" in p}


def component(package, checksums, kind):
    c = {
        "type": kind,
        "bom-ref": purl(package),
        "name": package["name"],
        "version": package["version"],
        "purl": purl(package),
    }
    if package.get("license"):
        c["licenses"] = [{"expression": package["license"]}]
    checksum = checksums.get(f"{package['name']}@{package['version']}")
    if checksum:
        c["hashes"] = [{"alg": "SHA-256", "content": checksum}]
    if package.get("repository"):
        c["externalReferences"] = [{"type": "vcs", "url": package["repository"]}]
    return c


def sbom(target, version, source_date_epoch, artifacts):
    meta = metadata(target)
    root, packages, edges = compiled_in(meta, target, artifacts)
    checksums = lock_checksums()
    created = datetime.datetime.fromtimestamp(int(source_date_epoch), datetime.timezone.utc)
    libraries = sorted((packages[pid] for pid in edges if pid != root), key=lambda p: (p["name"], p["version"]))
    main = component(packages[root], checksums, "application")
    main["properties"] = [{"name": "cdx:rust:target", "value": target}]
    body = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "timestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "component": main,
            "tools": {"components": [{"type": "application", "name": "scripts/release/release.py"}]},
        },
        "components": [component(p, checksums, "library") for p in libraries],
        "dependencies": sorted(
            ({"ref": purl(packages[pid]), "dependsOn": sorted(purl(packages[d]) for d in deps)}
             for pid, deps in edges.items()),
            key=lambda d: d["ref"],
        ),
    }
    # One serial number per content, so that a rebuild says the same.
    digest = hashlib.sha256(dump(body).encode()).digest()
    body["serialNumber"] = uuid.UUID(bytes=digest[:16], version=5).urn
    if packages[root]["version"] != version:
        sys.exit(f"the release is {version} but Cargo.toml says {packages[root]['version']}")
    return body


def sbom_crates(doc):
    main = doc["metadata"]["component"]
    return sorted([(c["name"], c["version"]) for c in doc["components"]] + [(main["name"], main["version"])])


def compare(sbom_path, binary):
    """The SBOM against the binary's own list (.dep-v0): every crate the
    SBOM names is in it; what the list names beyond the SBOM is printed
    (cargo-auditable takes its list from `cargo metadata`, whose resolve
    turns weak `dep?/feature` dependencies on: crates the build did not
    compile, which the SBOM leaves out)."""
    listed = sbom_crates(json.load(open(sbom_path)))
    embedded = runtime_crates(binary)
    missing = sorted(set(listed) - set(embedded))
    if missing:
        sys.exit(f"{sbom_path} names crates {binary}'s .dep-v0 does not: {missing}")
    beyond = sorted(set(embedded) - set(listed))
    print(json.dumps({"sbom": len(listed), "dep-v0": len(embedded),
                      "dep-v0 only (not compiled)": [f"{n} {v}" for n, v in beyond]}))


def provenance(facts_path):
    f = json.load(open(facts_path))
    source = {"uri": f["source_uri"], "digest": {"gitCommit": f["revision"], "gitTree": f["tree"]}}
    if not f["source_uri"]:
        source = {"name": "source", "digest": source["digest"]}
    toolchains = [
        {"name": f"rust toolchain {t['toolchain']} ({t['target']})",
         "annotations": {"target": t["target"], "toolchain": t["toolchain"], "rustc -vV": t["rustc"], "cargo": t["cargo"]}}
        for t in f["toolchains"]
    ]
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": sorted(f["subjects"], key=lambda s: s["name"]),
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": "https://opstatus.kube9.dev/release/v1",
                "externalParameters": {
                    "version": f["version"],
                    "source": {"revision": f["revision"], "uri": f["source_uri"]},
                    "image": f["image"],
                },
                "internalParameters": {
                    "SOURCE_DATE_EPOCH": f["source_date_epoch"],
                    "targets": f["targets"],
                    "uncommittedChanges": f["dirty"],
                },
                "resolvedDependencies": [source]
                + [{"name": "Cargo.lock", "digest": {"sha256": f["cargo_lock"]}}]
                + sorted(toolchains, key=lambda t: t["annotations"]["target"]),
            },
            "runDetails": {
                "builder": {
                    "id": "https://opstatus.kube9.dev/release/scripts/release.sh",
                    "version": f["tools"],
                },
                "metadata": {},
            },
        },
    }
    return statement


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    command, args = argv[1], argv[2:]
    if command == "dep-v0" and len(args) == 1:
        sys.stdout.write(dump(dep_v0(args[0])))
    elif command == "sbom" and len(args) == 4:
        sys.stdout.write(dump(sbom(*args)))
    elif command == "compare" and len(args) == 2:
        compare(*args)
    elif command == "provenance" and len(args) == 1:
        sys.stdout.write(dump(provenance(args[0])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
