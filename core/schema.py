"""The OpenAPI schema says every status the API can answer, with its error body.

drf-spectacular documents what each view declares; the answers that come from the layers
around every view (authentication, permissions, content negotiation, the input boundary, an
address that matches no route) are added here, to every operation, as the one Error body."""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "field": {"type": "string", "description": "the input at fault, when one is"},
    },
    "required": ["detail"],
}
# status: why any operation may answer it
AROUND_EVERY_VIEW = {
    "400": "a malformed request: a control character or over-long value (the field is named)",
    "401": "no credentials, or wrong ones",
    "403": "you lack the role this operation needs",
    "404": "no such object, or an address that matches no route",
    "406": "the Accept header asks for a format this operation does not give",
}
WITH_A_BODY = {
    "413": "a body over 5 MB (DATA_UPLOAD_MAX_MEMORY_SIZE), refused unread",
    "415": "a body in a format this operation does not read",
}


def document_errors(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """POSTPROCESSING_HOOKS entry: add the statuses of AROUND_EVERY_VIEW (and WITH_A_BODY)
    that an operation does not document yet, each with the Error body."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Error", ERROR_SCHEMA)
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            responses = operation.setdefault("responses", {})
            extra = dict(AROUND_EVERY_VIEW)
            if "requestBody" in operation:
                extra.update(WITH_A_BODY)
            for status, why in extra.items():
                if status not in responses:
                    responses[status] = {"description": why, "content": error}
    return result
