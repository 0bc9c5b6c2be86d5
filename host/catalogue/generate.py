#!/usr/bin/env python3
"""Generate host/catalogue/instance-types.json, orca's bundled EC2 instance-type catalogue.

Inputs (both Apache-2.0, see README.md in this folder):

* Instance specifications: moto's bundled DescribeInstanceTypes dump,
  moto/ec2/resources/instance_types.json.gz from the moto Python package.
* On-demand prices: Karpenter's generated initial pricing tables,
  pkg/providers/pricing/zz_generated.pricing_aws*.go from the Go module
  github.com/aws/karpenter-provider-aws, fetched from the Go module proxy
  (or read from a local module zip with --karpenter-zip).

Python 3.11, standard library only. The output depends only on the two inputs:
running it twice on the same inputs gives byte-identical output.

Usage (from the repository root):

    python3 host/catalogue/generate.py \
        --moto-json ~/.cache/orca/venv/moto-5.2.5/lib/python3.11/site-packages/moto/ec2/resources/instance_types.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import sys
import urllib.request
import zipfile

# ---------------------------------------------------------------- pinned inputs

MOTO_VERSION = "5.2.5"
MOTO_RESOURCE = "moto/ec2/resources/instance_types.json.gz"
DEFAULT_MOTO_JSON = os.path.expanduser(
    "~/.cache/orca/venv/moto-5.2.5/lib/python3.11/site-packages/" + MOTO_RESOURCE
)

KARPENTER_MODULE = "github.com/aws/karpenter-provider-aws"
KARPENTER_VERSION = "v1.15.1"
GOPROXY = "https://proxy.golang.org"
PRICING_DIR = "pkg/providers/pricing"

# Karpenter's pricing files that are used, with the Go variable each defines.
# All prices in these files are on-demand USD per hour.
# Not used: zz_generated.pricing_aws_cn.go (cn-north-1), whose prices are in
# CNY (Karpenter queries the China pricing API with currency "CNY"), so they
# are not comparable with the others.
PRICE_FILES = (
    ("zz_generated.pricing_aws.go", "InitialOnDemandPricesAWS"),
    ("zz_generated.pricing_aws_us_gov.go", "InitialOnDemandPricesUSGov"),
)

DEFAULT_OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "instance-types.json")

# EC2 architecture name -> Kubernetes (GOARCH) name. None = ignore this entry.
# A type left with no architecture (the mac instances: x86_64_mac / arm64_mac
# only) is dropped. An architecture not listed here is an error, so that a
# newer moto dump with something new is noticed rather than silently mapped.
ARCHITECTURES = {
    "x86_64": "amd64",
    "arm64": "arm64",
    "i386": None,
    "x86_64_mac": None,
    "arm64_mac": None,
}


# ---------------------------------------------------------------- instance specs

def load_types(path: str) -> tuple[list[dict], list[str]]:
    """Return (types sorted by name, names of dropped types)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        raw = json.load(f)
    entries = raw.values() if isinstance(raw, dict) else raw
    types, dropped = [], []
    for it in entries:
        name = it["InstanceType"]
        archs = set()
        for a in it["ProcessorInfo"]["SupportedArchitectures"]:
            if a not in ARCHITECTURES:
                raise SystemExit(f"{name}: unknown architecture {a!r}; update ARCHITECTURES")
            if ARCHITECTURES[a]:
                archs.add(ARCHITECTURES[a])
        if not archs:
            dropped.append(name)
            continue
        gpus = it.get("GpuInfo", {}).get("Gpus", [])
        gpu_count = sum(int(g.get("Count", 0)) for g in gpus)
        gpu_model = None
        if gpus and gpu_count:
            gpu_model = " ".join(p for p in (gpus[0].get("Manufacturer"), gpus[0].get("Name")) if p) or None
        types.append({
            "name": name,
            "vcpus": int(it["VCpuInfo"]["DefaultVCpus"]),
            "memoryMib": int(it["MemoryInfo"]["SizeInMiB"]),
            "gpus": gpu_count,
            "gpuModel": gpu_model,
            "architectures": sorted(archs),
            "currentGeneration": bool(it.get("CurrentGeneration", False)),
        })
    types.sort(key=lambda t: t["name"])
    names = [t["name"] for t in types]
    if len(names) != len(set(names)):
        raise SystemExit("duplicate instance type names in moto data")
    return types, sorted(dropped)


# ---------------------------------------------------------------- prices

def fetch_karpenter_zip(version: str) -> bytes:
    # Go proxy path escaping: upper-case letters become "!" + lower-case.
    esc = lambda s: re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), s)
    url = f"{GOPROXY}/{esc(KARPENTER_MODULE)}/@v/{esc(version)}.zip"
    print(f"fetching {url}", file=sys.stderr)
    with urllib.request.urlopen(url, timeout=300) as r:
        return r.read()


_GENERATED = re.compile(r"^//\s*generated at (\S+)")
_REGION = re.compile(r'^\s*"([a-z0-9-]+)":\s*\{\s*$')
_ENTRY = re.compile(r'"([A-Za-z0-9.\-]+)":\s*([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*,')


def parse_pricing_go(text: str, var: str, fname: str) -> tuple[str | None, dict[str, dict[str, float]]]:
    """Parse Karpenter's generated Go map literal into {region: {type: price}}."""
    generated = None
    for line in text.splitlines():
        m = _GENERATED.match(line)
        if m:
            generated = m.group(1)
            break
    start = re.search(r"\bvar\s+" + re.escape(var) + r"\s*=\s*map\[string\]map\[[\w.]+\]float64\{", text)
    if not start:
        raise SystemExit(f"{fname}: cannot find 'var {var} = map[string]map[...]float64{{'")
    prices: dict[str, dict[str, float]] = {}
    region = None
    for line in text[start.end():].splitlines():
        s = line.strip()
        if not s or s.startswith("//"):
            continue
        m = _REGION.match(line)
        if m:
            if region is not None:
                raise SystemExit(f"{fname}: nested region {m.group(1)!r}")
            region = m.group(1)
            if region in prices:
                raise SystemExit(f"{fname}: region {region!r} twice")
            prices[region] = {}
            continue
        if s == "},":
            if region is None:
                raise SystemExit(f"{fname}: unbalanced '}},'")
            region = None
            continue
        if s == "}":
            if region is not None:
                raise SystemExit(f"{fname}: map ends inside region {region!r}")
            break
        if region is None:
            raise SystemExit(f"{fname}: unexpected line outside a region: {s!r}")
        body = _ENTRY.sub("", s + ("" if s.endswith(",") else ",")).strip()
        if body:
            raise SystemExit(f"{fname}: cannot parse {s!r}")
        for t, p in _ENTRY.findall(s + ("" if s.endswith(",") else ",")):
            if t in prices[region]:
                raise SystemExit(f"{fname}: {region} {t} twice")
            prices[region][t] = float(p)
    else:
        raise SystemExit(f"{fname}: map literal not closed")
    if not prices or not all(prices.values()):
        raise SystemExit(f"{fname}: no prices parsed")
    return generated, prices


def load_prices(zip_bytes: bytes, version: str) -> tuple[list[tuple[str, str | None]], dict[str, dict[str, float]]]:
    zf = zipfile.ZipFile(io.BytesIO(zip_bytes))
    prefix = f"{KARPENTER_MODULE}@{version}/{PRICING_DIR}/"
    files, merged = [], {}
    for fname, var in PRICE_FILES:
        try:
            text = zf.read(prefix + fname).decode("utf-8")
        except KeyError:
            raise SystemExit(f"{prefix + fname} not in the module zip")
        generated, prices = parse_pricing_go(text, var, fname)
        for region, table in prices.items():
            if region in merged:
                raise SystemExit(f"region {region!r} in more than one pricing file")
            merged[region] = table
        files.append((fname, generated))
    return files, merged


# ---------------------------------------------------------------- output

def dumps(v) -> str:
    return json.dumps(v, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


def render(sources: dict, types: list[dict], prices: dict[str, dict[str, float]]) -> str:
    # Written by hand, one instance type (or one price) per line, so diffs of
    # a regeneration are reviewable. Field order of a type is fixed (the
    # documented order), everything else is sorted.
    order = ("name", "vcpus", "memoryMib", "gpus", "gpuModel", "architectures", "currentGeneration")
    out = ["{", '  "sources": ' + dumps(sources) + ",", '  "types": [']
    rows = ["    {" + ", ".join(f"{json.dumps(k)}: {dumps(t[k])}" for k in order) + "}" for t in types]
    out.append(",\n".join(rows))
    out.append("  ],")
    out.append('  "onDemandPrices": {')
    regions = []
    for region in sorted(prices):
        lines = [f"      {json.dumps(t)}: {json.dumps(p)}" for t, p in sorted(prices[region].items())]
        regions.append(f"    {json.dumps(region)}: {{\n" + ",\n".join(lines) + "\n    }")
    out.append(",\n".join(regions))
    out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moto-json", default=DEFAULT_MOTO_JSON,
                    help=f"path to moto {MOTO_VERSION}'s {MOTO_RESOURCE} (default: %(default)s)")
    ap.add_argument("--karpenter-version", default=KARPENTER_VERSION,
                    help=f"{KARPENTER_MODULE} module version (default: %(default)s)")
    ap.add_argument("--karpenter-zip", default=None,
                    help="use this local module zip instead of fetching it from " + GOPROXY)
    ap.add_argument("--output", default=DEFAULT_OUTPUT, help="output file (default: %(default)s)")
    args = ap.parse_args()

    types, dropped = load_types(args.moto_json)
    if args.karpenter_zip:
        with open(args.karpenter_zip, "rb") as f:
            zip_bytes = f.read()
    else:
        zip_bytes = fetch_karpenter_zip(args.karpenter_version)
    print(f"karpenter zip sha256 {hashlib.sha256(zip_bytes).hexdigest()}", file=sys.stderr)
    files, all_prices = load_prices(zip_bytes, args.karpenter_version)

    known = {t["name"] for t in types}
    prices = {r: {t: p for t, p in table.items() if t in known} for r, table in all_prices.items()}
    prices = {r: table for r, table in prices.items() if table}

    price_desc = " + ".join(
        f"{PRICING_DIR}/{fname}" + (f" (generated {gen})" if gen else "") for fname, gen in files)
    sources = {
        "instanceTypes": f"moto {MOTO_VERSION} {MOTO_RESOURCE} (Apache-2.0)",
        "onDemandPrices": f"{KARPENTER_MODULE} {args.karpenter_version} {price_desc} (Apache-2.0)",
    }
    text = render(sources, types, prices)
    json.loads(text)  # sanity: the hand-joined output is valid JSON
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.replace(tmp, args.output)

    # Report (stderr, not part of the output).
    priced_anywhere = set().union(*(set(t) for t in all_prices.values()))
    print(f"types: {len(types)} (dropped, no amd64/arm64: {len(dropped)}: {', '.join(dropped)})", file=sys.stderr)
    for r in sorted(all_prices):
        missing = sorted(set(all_prices[r]) - known)
        print(f"{r}: {len(prices.get(r, {}))} priced types"
              f" ({len(missing)} priced by Karpenter but not in moto: {', '.join(missing) or '-'})", file=sys.stderr)
    unpriced = sorted(known - priced_anywhere)
    print(f"types with no price in any region: {len(unpriced)}", file=sys.stderr)
    print(f"wrote {args.output} ({len(text.encode())} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
