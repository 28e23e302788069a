"""Check an API answer against the OpenAPI schema the app serves: every key documented, every
required key there, recursively through objects and arrays (the part of a schema check the
tests need; schemathesis in .ci/run does the rest)."""

from __future__ import annotations

from typing import Any


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = schema["components"]["schemas"][name]
    if "allOf" in node:  # drf-spectacular's nullable or described references
        merged: dict[str, Any] = {}
        for part in node["allOf"]:
            merged.update(_resolve(schema, part))
        return merged
    return node


def mismatches(schema: dict, node: dict, value: Any, where: str = "body") -> list[str]:
    node = _resolve(schema, node)
    found: list[str] = []
    if isinstance(value, dict) and "properties" in node:
        props = node["properties"]
        found += [f"{where}.{key} is not documented" for key in value if key not in props]
        found += [
            f"{where}.{key} is missing" for key in node.get("required", []) if key not in value
        ]
        for key, child in value.items():
            if key in props:
                found += mismatches(schema, props[key], child, f"{where}.{key}")
    elif (
        isinstance(value, dict)
        and node.get("type") == "object"
        and "additionalProperties" not in node
    ):
        found.append(f"{where} is an object the schema gives no properties")
    elif isinstance(value, list) and "items" in node:
        for index, item in enumerate(value):
            found += mismatches(schema, node["items"], item, f"{where}[{index}]")
    return found


def response_mismatches(schema: dict, path: str, method: str, response) -> list[str]:
    operation = schema["paths"][path][method]
    documented = operation["responses"].get(str(response.status_code))
    if documented is None:
        return [f"{method.upper()} {path} does not document {response.status_code}"]
    content = documented.get("content", {}).get("application/json")
    if content is None:
        return [f"{method.upper()} {path} {response.status_code} documents no JSON body"]
    return mismatches(schema, content["schema"], response.json())
