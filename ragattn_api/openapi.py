"""The OpenAPI document and its pages: as strict as the server, readable offline.

``/schema`` and ``/schema/swagger`` render Swagger UI from files served by the app itself
(``ragattn_api/static/swagger-ui-*``, Swagger UI 5.33.1 from the ``drf-spectacular-sidecar``
wheel, Apache 2.0, its licence beside them), so the pages work without any CDN.
``/schema/openapi.json`` is the document. With API keys configured it declares a Bearer security
scheme on every model route.

The pages run no inline script (Swagger UI starts from ``/static/swagger-init.js`` and fetches the
document), so they are sent with :data:`DOCS_CONTENT_SECURITY_POLICY` (scripts from this origin
only) and ``X-Frame-Options: DENY`` (:func:`api.edge.add_response_headers`).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from litestar import MediaType, Response
from litestar.openapi.config import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin, YamlRenderPlugin
from litestar.openapi.spec import Components, OpenAPI, OpenAPIType, Schema, SecurityScheme

import ragattn
from ragattn.compress.registry import METHODS as COMPRESS_METHODS
from ragattn.languages import LANGUAGES
from ragattn.methods import MethodTable
from ragattn.rerank.registry import METHODS as RERANK_METHODS
from ragattn.settings import Settings
from ragattn.types import DEFAULT_BUDGET
from ragattn_api.errors import error_response

SECURITY_SCHEME = "bearer"
_ASSETS = "/static"
DOCS_PATH = "/schema"
DOCS_CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
"""The CSP of the pages under ``/schema``: Swagger UI sets inline styles, never inline scripts."""


class _OfflineSwagger(SwaggerRenderPlugin):
    """Swagger UI from this server's files, started by a script file instead of an inline one."""

    def render(self, request: Any, openapi_schema: dict[str, Any]) -> bytes:
        title = html.escape(str(openapi_schema["info"]["title"]))
        spec_url = html.escape(f"{DOCS_PATH}/openapi.json", quote=True)
        return (
            "<!DOCTYPE html><html><head>"
            f"<title>{title}</title>{self.favicon}"
            '<meta charset="utf-8"/>'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link href="{self.css_url}" rel="stylesheet">'
            f'<script src="{self.js_url}"></script>'
            f'<script src="{self.standalone_preset_js_url}"></script>'
            f'<script src="{_ASSETS}/swagger-init.js"></script>'
            "</head><body>"
            f'<div id="swagger-container" data-spec-url="{spec_url}"></div>'
            "</body></html>"
        ).encode()


def security_requirement(settings: Settings) -> list[dict[str, list[str]]] | None:
    """The OpenAPI security requirement of the model routes (``None`` without API keys)."""
    return [{SECURITY_SCHEME: []}] if settings.api_keys else None


def openapi_config(settings: Settings) -> OpenAPIConfig:
    """The app's OpenAPI config: offline Swagger UI at ``/schema`` and ``/schema/swagger``."""
    components = Components()
    if settings.api_keys:
        components = Components(
            security_schemes={
                SECURITY_SCHEME: SecurityScheme(
                    type="http",
                    scheme="bearer",
                    description="One of the server's RAGATTN_API_KEYS as 'Authorization: Bearer'",
                )
            }
        )
    swagger = _OfflineSwagger(
        js_url=f"{_ASSETS}/swagger-ui-bundle.js",
        css_url=f"{_ASSETS}/swagger-ui.css",
        standalone_preset_js_url=f"{_ASSETS}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{_ASSETS}/swagger-ui-favicon-32x32.png'>",
        path=["/", "/swagger"],
    )
    return OpenAPIConfig(
        title="ragattn",
        version=ragattn.__version__,
        path=DOCS_PATH,
        description="Attention-based reranking and compression of retrieved context.",
        components=components,
        render_plugins=[swagger, JsonRenderPlugin(), YamlRenderPlugin()],
    )


def _present(name: str) -> Schema:
    """Matches an object whose ``name`` is present and not null (how the server reads it)."""
    not_null = Schema(schema_not=Schema(type=OpenAPIType.NULL))
    return Schema(required=[name], properties={name: not_null})


def _exactly_one(*names: str) -> Schema:
    return Schema(one_of=[_present(n) for n in names])


def _none_or_one(*names: str) -> Schema:
    """Matches an object with at most one of ``names`` present (a budget: none is the default
    budget, :data:`~ragattn.types.DEFAULT_BUDGET`)."""
    none = Schema(all_of=[Schema(schema_not=_present(n)) for n in names])
    return Schema(one_of=[*(_present(n) for n in names), none])


def _at_most_one(a: str, b: str) -> Schema:
    return Schema(schema_not=Schema(all_of=[_present(a), _present(b)]))


def _equals(name: str, value: object) -> Schema:
    """Matches an object whose ``name`` is present and equal to ``value``."""
    return Schema(required=[name], properties={name: Schema(const=value)})


def _one_of(name: str, values: Sequence[object]) -> Schema:
    """Matches an object whose ``name`` is present and one of ``values``."""
    return Schema(required=[name], properties={name: Schema(enum=list(values))})


def _never_both(a: Schema, b: Schema) -> Schema:
    return Schema(schema_not=Schema(all_of=[a, b]))


def _ceiling_rules(*budgets: str) -> list[Schema]:
    """``max_tokens`` (the ceiling of a ratio) never with one of the other ``budgets``."""
    return [_never_both(_present("max_tokens"), _present(b)) for b in budgets]


def _ask_rules() -> list[Schema]:
    """The options of ``/v1/ask`` a flow cannot honour (``PipelineOptions`` refuses them with a
    400 naming the option and the flow): the one read with ``rerank`` or ``compress`` false, and
    a ``ratio``, ``max_context_tokens`` or a ``language`` other than ``auto`` with ``compress``
    false."""
    one_read = _equals("flow", "one_read")
    return [
        _never_both(one_read, _equals("rerank", False)),
        _never_both(one_read, _equals("compress", False)),
        _never_both(_equals("compress", False), _present("ratio")),
        _never_both(_equals("compress", False), _one_of("language", LANGUAGES)),
        _never_both(_equals("compress", False), _present("max_context_tokens")),
    ]


def _property(schema: Schema, name: str) -> Schema | None:
    prop = (schema.properties or {}).get(name)
    return prop if isinstance(prop, Schema) else None


def _numeric_bounds(schemas: dict[str, Any]) -> None:
    """Copy the ``Meta`` bounds of the request Structs' number fields into the document.

    Litestar drops a bound that is 0 (``ratio: Meta(gt=0, le=1)`` came out as ``maximum: 1`` only,
    ``threshold: Meta(ge=0)`` without its minimum), so ``ratio: 0`` looked valid while the server
    refused it. msgspec's own reading of the types is the reference.
    """
    import msgspec

    from ragattn_api import schemas as wire

    targets = {
        "ge": "minimum",
        "le": "maximum",
        "gt": "exclusive_minimum",
        "lt": "exclusive_maximum",
    }
    numbers = msgspec.inspect.IntType | msgspec.inspect.FloatType
    for name, schema in schemas.items():
        struct = getattr(wire, name, None)
        if not (isinstance(schema, Schema) and isinstance(struct, type)):
            continue
        if not issubclass(struct, msgspec.Struct):
            continue
        info = msgspec.inspect.type_info(struct)
        for field in getattr(info, "fields", ()):
            prop = _property(schema, field.encode_name)
            if prop is None:
                continue
            for kind in getattr(field.type, "types", (field.type,)):
                # a list of numbers (``first_stage_order``): the bounds are its items'
                item = getattr(kind, "item_type", None)
                target = _items(prop) if isinstance(item, numbers) else prop
                kind = item if isinstance(item, numbers) else kind
                if target is None or not isinstance(kind, numbers):
                    continue
                for bound, attribute in targets.items():
                    value = getattr(kind, bound, None)
                    if value is not None:
                        setattr(target, attribute, value)


def _items(prop: Schema) -> Schema | None:
    """The item schema of an array property, or of the array branch of an optional one."""
    for branch in (prop, *(prop.one_of or ())):
        if isinstance(branch, Schema) and isinstance(branch.items, Schema):
            return branch.items
    return None


def tighten(
    document: OpenAPI,
    settings: Settings,
    compress_methods: list[str],
    search_modes: list[str] | None = None,
    rerank_methods: list[str] | None = None,
) -> None:
    """Add the rules the request Structs cannot state to the generated document, in place.

    Msgspec types give the per-field rules (types, bounds, non-blank queries); the server also
    holds rules between fields and limits from settings, and the document must say them too, so a
    request that fits the document is one the server accepts (token limits aside: they are in
    proxy tokens, documented as 413):

    - exactly one of ``documents`` / ``texts`` (rerank) or ``documents`` / ``context`` (compress),
      and at most one budget among ``ratio``, ``rate``, ``target_tokens``, ``target_token``,
      ``threshold`` (none: :data:`~ragattn.types.DEFAULT_BUDGET`), ``max_tokens`` not with
      ``target_tokens`` or ``threshold``; at most one of ``top_n`` and its alias ``top_k``; in the
      rerank request's ``prune`` object at most one of ``ratio``, ``target_tokens``,
      ``threshold`` (``max_tokens`` not with the last two) and no other key, and ``prune`` not
      with ``method``;
    - at most ``RAGATTN_MAX_DOCUMENTS`` documents, ``k`` and ``top_k``;
    - ``method`` one of the rerank methods (``rerank_methods``, default: the library's registry)
      or compression methods this server knows, each described with what it needs (the description
      of ``method``);
      ``mode`` one of the search modes its index has (``search_modes``; an index built without
      dense vectors has only ``bm25``).
    """
    if rerank_methods is None:
        rerank_methods = list(RERANK_METHODS)
    schemas = (document.components.schemas or {}) if document.components else {}
    _numeric_bounds(schemas)
    budget = ("ratio", "rate", "target_tokens", "target_token", "threshold")
    not_ratio = ("target_tokens", "target_token", "threshold")
    rules: dict[str, list[Schema]] = {
        "RerankRequest": [
            _exactly_one("documents", "texts"),
            _at_most_one("top_n", "top_k"),
            _at_most_one("prune", "method"),
        ],
        "PruneIn": [
            _none_or_one("ratio", "target_tokens", "threshold"),
            *_ceiling_rules("target_tokens", "threshold"),
        ],
        "CompressRequest": [
            _exactly_one("documents", "context"),
            _none_or_one(*budget),
            *_ceiling_rules(*not_ratio),
        ],
        "RerankCompressRequest": [
            _exactly_one("documents", "context"),
            _none_or_one(*budget),
            *_ceiling_rules(*not_ratio),
            _at_most_one("top_n", "top_k"),
        ],
        "AskRequest": _ask_rules(),
    }
    for name, extra in rules.items():
        schema = schemas.get(name)
        if isinstance(schema, Schema):
            schema.all_of = extra
    _describe_prune(schemas)
    _describe_limits(schemas)
    for name, field in (
        ("RerankRequest", "documents"),
        ("RerankRequest", "texts"),
        ("CompressRequest", "documents"),
        ("CompressRequest", "context"),
        ("RerankCompressRequest", "documents"),
        ("RerankCompressRequest", "context"),
    ):
        schema = schemas.get(name)
        prop = _property(schema, field) if isinstance(schema, Schema) else None
        if prop is not None:
            # minItems too: Litestar drops it for a list inside a union (``context``).
            prop.min_items = 1
            prop.max_items = settings.max_documents
    for name, field in (("RetrieveRequest", "k"), ("AskRequest", "top_k")):
        schema = schemas.get(name)
        prop = _property(schema, field) if isinstance(schema, Schema) else None
        if prop is not None:
            prop.maximum = settings.max_documents
    for name in ("RetrieveRequest", "AskRequest"):
        schema = schemas.get(name)
        prop = _property(schema, "mode") if isinstance(schema, Schema) else None
        if prop is not None and search_modes:
            prop.one_of = [
                Schema(type=OpenAPIType.STRING, enum=list(search_modes)),
                Schema(type=OpenAPIType.NULL),
            ]
    methods: dict[str, tuple[list[str], str, MethodTable[Any]]] = {
        "RerankRequest": (rerank_methods, _RERANK_METHOD_HELP, RERANK_METHODS),
        "CompressRequest": (compress_methods, _COMPRESS_METHOD_HELP, COMPRESS_METHODS),
        "RerankCompressRequest": (compress_methods, _COMPRESS_METHOD_HELP, COMPRESS_METHODS),
    }
    for name, (names, help_text, table) in methods.items():
        schema = schemas.get(name)
        prop = _property(schema, "method") if isinstance(schema, Schema) else None
        if prop is not None and names:
            prop.one_of = [
                Schema(type=OpenAPIType.STRING, enum=list(names)),
                Schema(type=OpenAPIType.NULL),
            ]
            prop.description = _method_description(help_text, names, table)


_PRUNE_HELP = (
    "Optional, not part of Cohere's API: each result's kept sentences under one budget, counted "
    "across all returned results in the proxy's tokens. At most one of ratio (fraction of tokens "
    "kept), target_tokens (most tokens kept) or threshold (lowest keep score kept), with ratio "
    "optionally max_tokens (a ceiling on it); none ({}): the default budget of every door, ratio "
    f"{DEFAULT_BUDGET.value} at most {DEFAULT_BUDGET.max_tokens} tokens (max_tokens alone "
    "replaces that ceiling); any other key is a 400. The compressor's one "
    "read then ranks and prunes: each result gains pruned_text and kept_spans (code-point "
    "offsets into its document's text as sent), meta gains pruning (token counts) and the "
    "response's method names the ranking method. Not with 'method'. Omitted (or null), the "
    "response is Cohere's shape unchanged."
)
_PRUNED_TEXT_HELP = (
    "Only with 'prune': the document's kept sentences in document order, each with its original "
    "trailing whitespace (a concatenation of substrings of its text), right-stripped; empty when "
    "none of its sentences fit the budget. A Markdown document (one with a fenced code block, a "
    "table or an ATX heading) is cut along its structure and its kept units joined as valid "
    "Markdown: the fences around a kept piece of code and the header over a kept table row are "
    "repeated where the kept text lacks them, each listed in 'added'."
)
_ADDED_HELP = (
    "Only with 'prune', and only where pruned_text repeats something: the fences and table "
    "headers the library inserted into pruned_text so that a Markdown document's kept text stays "
    "valid Markdown. Each has its kind (fence or table_header), its text, its offset in "
    "pruned_text (code points) and the [source_start, source_end) range of the document's text it "
    "repeats; never a kept span. Counted in meta.pruning's compressed_tokens and the budget."
)


def _describe_prune(schemas: dict[str, Any]) -> None:
    """The ``prune`` request object and the fields it adds to the response, described; the
    object refuses unknown keys (the server does: ``forbid_unknown_fields``)."""
    prune = schemas.get("PruneIn")
    if isinstance(prune, Schema):
        prune.additional_properties = False
        prune.description = (
            "Exactly one budget: ratio (fraction of tokens kept, in (0, 1]), target_tokens (most "
            "tokens kept) or threshold (lowest keep score kept, in [0, 1]); with ratio, "
            "optionally max_tokens (the most tokens kept whatever the ratio gives); optionally "
            "language (the documents' language for sentence splitting: auto, the default, or an "
            "ISO 639-1 code); no other key."
        )
    request = schemas.get("RerankRequest")
    field = _property(request, "prune") if isinstance(request, Schema) else None
    if field is not None:
        field.description = _PRUNE_HELP
    result = schemas.get("RerankResultOut")
    text = _property(result, "pruned_text") if isinstance(result, Schema) else None
    if text is not None:
        text.description = _PRUNED_TEXT_HELP
    added = _property(result, "added") if isinstance(result, Schema) else None
    if added is not None:
        added.description = _ADDED_HELP


_MAX_TOKENS_PER_DOC_HELP = (
    "Optional: the most proxy tokens of each document, its title and text together. A longer "
    "document has its text cut at a token boundary (never its title) and a warning says so, "
    "instead of a 413; the cut text is a prefix of the one sent, so offsets index the text as "
    "sent. Above the server's limit (RAGATTN_MAX_TOKENS_PER_DOC) it changes nothing. A 413 "
    "about a document or the request's size names the value of this field (or the split) under "
    "which the same documents are accepted."
)
_TITLE_HELP = (
    "Optional: read by the proxy before the text, so it counts with the text against "
    "max_tokens_per_doc and the request budget; never truncated (a title alone at the "
    "per-document limit is a 413 naming documents[i].title)."
)


def _describe_limits(schemas: dict[str, Any]) -> None:
    """``max_tokens_per_doc`` on every route with documents, and what a document's ``title``
    counts for."""
    for name in ("RerankRequest", "CompressRequest", "RerankCompressRequest"):
        schema = schemas.get(name)
        prop = _property(schema, "max_tokens_per_doc") if isinstance(schema, Schema) else None
        if prop is not None:
            prop.description = _MAX_TOKENS_PER_DOC_HELP
    document = schemas.get("DocumentIn")
    title = _property(document, "title") if isinstance(document, Schema) else None
    if title is not None:
        title.description = _TITLE_HELP


_RERANK_METHOD_HELP = (
    "Optional, not part of Cohere's API: the rerank method for this request; omitted, the "
    "server's configured method (RAGATTN_RERANK_METHOD, named by /ready's rerank_method) answers "
    "and the response is Cohere's shape unchanged. When sent, the response names it in 'method'. "
    "The Cohere field 'model' never selects a method."
)
_COMPRESS_METHOD_HELP = (
    "Optional: the compress method for this request; omitted, RAGATTN_COMPRESS_METHOD or the "
    "library's default. The response names the method that served it in 'method'."
)


def _method_description(help_text: str, names: list[str], table: MethodTable[Any]) -> str:
    """The ``method`` field's help: what it does and, per name, what that method reads."""
    lines = [help_text, "Methods:"]
    for name in names:
        spec = table.get(name)
        if spec is None:  # a name the caller added to the enum (not in the library's table)
            lines.append(f"- {name}")
            continue
        needs = ", ".join(spec.needs()) or "nothing"
        lines.append(f"- {name}: {spec.description} (needs {needs})")
    return "\n".join(lines)


async def json_not_found(response: Response[Any]) -> Response[Any]:
    """``after_request`` hook: the OpenAPI router answers unknown ``/schema/...`` pages with an
    HTML 404 of its own; every other error is JSON in the one error shape, so this one is too."""
    if response.status_code == 404 and response.media_type == MediaType.HTML:
        return error_response("not_found", "no such route or file")
    return response


__all__ = [
    "SECURITY_SCHEME",
    "json_not_found",
    "openapi_config",
    "security_requirement",
    "tighten",
]
