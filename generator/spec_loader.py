"""Load and validate every YAML file under spec/.

Each file is validated against the JSON Schema of its kind (``spec/schema/<kind>.schema.json``;
op files are kind ``ops``). Errors name the file and the key path::

    spec/ops/cuda_tile/math.yaml: ops[3].attributes[0].kind: 'enumm' is not one of [...]
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

#: libyaml's loader when PyYAML has it (the same documents, ~10x faster than the pure-Python one)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SpecError(Exception):
    """A spec file is malformed; the message names the file and key path."""


@dataclass
class Spec:
    root: Path
    #: kind -> list of (relative path, document)
    files: dict[str, list[tuple[str, dict]]] = field(default_factory=dict)

    def docs(self, kind: str) -> list[dict]:
        return [doc for _, doc in self.files.get(kind, [])]

    def ops(self, dialect: str) -> list[dict]:
        """Every op entry of ``dialect`` (each carries ``family`` and ``dialect``)."""
        out = []
        for rel, doc in self.files.get("ops", []):
            if doc["dialect"] != dialect:
                continue
            for op in doc["ops"]:
                entry = dict(op)
                entry.setdefault("family", doc["family"])
                entry["dialect"] = dialect
                entry["_file"] = rel
                if doc.get("test_only"):
                    entry.setdefault("test_only", True)
                out.append(entry)
        return out

    def dialects(self) -> list[str]:
        seen = []
        for _, doc in self.files.get("ops", []):
            if doc["dialect"] not in seen:
                seen.append(doc["dialect"])
        return seen


def _key_path(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"


def _validators(root: Path) -> dict:
    """Spec kind -> a validator of its schema (``rows.schema.json`` and the like resolve as
    ``$ref`` targets)."""
    import jsonschema
    from referencing import Registry, Resource

    schemas = {}
    registry = Registry()
    for sf in sorted((root / "schema").glob("*.schema.json")):
        schema = json.loads(sf.read_text())
        schemas[sf.name[: -len(".schema.json")]] = schema
        registry = registry.with_resource(sf.name, Resource.from_contents(schema))
    return {
        kind: jsonschema.Draft202012Validator(schema, registry=registry)
        for kind, schema in schemas.items()
    }


def load_file(text: str, rel: str, validators: dict) -> tuple[str, dict]:
    """(kind, document) of spec file ``rel`` holding ``text``, validated against its kind's
    schema."""
    try:
        doc = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise SpecError(f"{rel}{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(doc, dict):
        raise SpecError(f"{rel}: <root>: expected a mapping")
    kind = doc.get("kind") or ("ops" if "ops" in doc else None)
    if kind not in validators:
        raise SpecError(
            f"{rel}: kind: unknown spec kind {kind!r} (no spec/schema/{kind}.schema.json)"
        )
    errors = sorted(validators[kind].iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        raise SpecError(f"{rel}: {_key_path(err.absolute_path)}: {err.message}")
    return kind, doc


def load_spec(root: Path) -> Spec:
    root = Path(root)
    validators = _validators(root)
    spec = Spec(root)
    for path in sorted(root.rglob("*.yaml")):
        rel = str(path.relative_to(root.parent))
        kind, doc = load_file(path.read_text(), rel, validators)
        spec.files.setdefault(kind, []).append((rel, doc))
    _check_cross_refs(spec)
    return spec


def replace_file(spec: Spec, rel: str, text: str) -> Spec:
    """A copy of ``spec`` whose file ``rel`` (e.g. ``spec/ptx/selection.yaml``) holds ``text``:
    validated and cross-checked as :func:`load_spec` does (for tests that plant one mistake)."""
    kind, doc = load_file(text, rel, _validators(spec.root))
    out = Spec(spec.root, {k: list(v) for k, v in spec.files.items()})
    for k, files in out.files.items():
        out.files[k] = [(r, d) for r, d in files if r != rel]
    out.files.setdefault(kind, []).append((rel, doc))
    out.files[kind].sort(key=lambda f: f[0])
    _check_cross_refs(out)
    return out


def _check_cross_refs(spec: Spec) -> None:
    """Checks JSON Schema cannot express: unique names/opcodes, known enums and constraints."""
    enums = {e["name"] for d in spec.docs("enums") for e in d["enums"]}
    constraints = {name for d in spec.docs("constraints") for name in d.get("types", {})}
    for dialect in spec.dialects():
        names, opcodes = {}, {}
        for op in spec.ops(dialect):
            where = f"{op['_file']}: ops[{op['name']}]"
            if op["name"] in names:
                raise SpecError(f"{where}.name: duplicate op (also in {names[op['name']]})")
            names[op["name"]] = op["_file"]
            code = op.get("opcode")
            if code is not None:
                if code in opcodes:
                    raise SpecError(f"{where}.opcode: 0x{code:X} already used by {opcodes[code]}")
                opcodes[code] = op["name"]
            for i, a in enumerate(op.get("attributes", [])):
                if a.get("enum") and a["enum"] not in enums:
                    raise SpecError(f"{where}.attributes[{i}].enum: unknown enum {a['enum']!r}")
            if not constraints:
                continue
            for key in ("operands", "results"):
                for i, v in enumerate(op.get(key, [])):
                    if v["type"] not in constraints:
                        raise SpecError(
                            f"{where}.{key}[{i}].type: unknown type constraint {v['type']!r} "
                            "(define it in spec/types/constraints.yaml)"
                        )
