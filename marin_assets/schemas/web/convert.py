"""Marin's ``marin.schemas.web.convert``: how HTML becomes text (the ``config`` of ``convert_page``).

Same classes, fields, defaults and draccus choice names as Marin (``markdownify``, ``resiliparse``,
``trafilatura``). What each method does here is described in :mod:`marin_assets.web.convert`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from typing import Any

from draccus.choice_types import ChoiceRegistry


@dataclass(frozen=True)
class ExtractionConfig(ChoiceRegistry):
    """Base of the extraction configs (a draccus choice type: ``--config.type resiliparse``)."""


DEFAULT_KEEP_INLINE_IMAGES_IN = ["li", "p", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "a"]


@dataclass(frozen=True)
class TrafilaturaConfig(ExtractionConfig):
    """Marin's trafilatura options (``trafilatura.extract(**asdict(config))``)."""

    favor_precision: bool = False
    favor_recall: bool = True
    include_comments: bool = False
    deduplicate: bool = False
    include_images: bool = False
    include_tables: bool = True
    include_links: bool = False
    include_formatting: bool = False
    output_format: str = "txt"

    @classmethod
    def default_config(cls) -> TrafilaturaConfig:
        """Marin's default preset."""
        return cls()

    @classmethod
    def fineweb_config(cls) -> TrafilaturaConfig:
        """FineWeb's settings: precision over recall, deduplicated, no comments."""
        return cls(favor_precision=True, favor_recall=False, include_comments=False, deduplicate=True)

    @classmethod
    def get_preset_config(cls, config: str) -> TrafilaturaConfig:
        """``"default"`` or ``"fineweb"``."""
        if config == "fineweb":
            return cls.fineweb_config()
        if config == "default":
            return cls.default_config()
        raise ValueError(f"Invalid config: {config}; expected 'default' or 'fineweb'")


@dataclass(frozen=True)
class HtmlToMarkdownConfig(ExtractionConfig):
    """Marin's markdown rendering options (the ``readability`` method's output format)."""

    include_images: bool = True
    include_links: bool = True
    heading_style: str = "ATX"
    keep_inline_images_in: list = field(default_factory=lambda: DEFAULT_KEEP_INLINE_IMAGES_IN.copy())

    @classmethod
    def default_config(cls) -> HtmlToMarkdownConfig:
        """Marin's default preset."""
        return cls()

    @classmethod
    def get_preset_config(cls, config: str) -> HtmlToMarkdownConfig:
        """Only ``"default"``."""
        if config == "default":
            return cls.default_config()
        raise ValueError(f"Invalid config: {config}; expected 'default'")

    @property
    def markdownify_kwargs(self) -> dict[str, Any]:
        """The fields that are markdownify options (all but ``include_images`` / ``include_links``)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("include_images", "include_links")
        }


_NOT_RESILIPARSE_KWARGS = ("prepend_title", "use_custom_variant", "markdownify_config")


@functools.cache
def _field_names(cls: type, skip: tuple[str, ...]) -> tuple[str, ...]:
    """The dataclass field names of ``cls`` but ``skip``, in order (``dataclasses.fields`` is slow)."""
    return tuple(f.name for f in fields(cls) if f.name not in skip)


@dataclass(frozen=True)
class ResiliparseConfig(ExtractionConfig):
    """Marin's resiliparse options (``extract_plain_text(html, **config.resiliparse_kwargs)``)."""

    preserve_formatting: bool = False
    main_content: bool = True
    links: bool = False
    list_bullets: bool = True
    alt_texts: bool = False
    form_fields: bool = False
    noscript: bool = False
    comments: bool | None = None
    skip_elements: list | None = None
    prepend_title: bool = False
    use_custom_variant: bool = False
    markdownify_config: HtmlToMarkdownConfig = field(default_factory=HtmlToMarkdownConfig.default_config)

    @classmethod
    def default_config(cls) -> ResiliparseConfig:
        """Marin's default preset."""
        return cls()

    @classmethod
    def get_preset_config(cls, config: str) -> ResiliparseConfig:
        """Only ``"default"``."""
        if config == "default":
            return cls.default_config()
        raise ValueError(f"Invalid config: {config}; expected 'default'")

    @property
    def resiliparse_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``extract_plain_text`` (``comments`` / ``skip_elements`` only when set)."""
        # Read per converted page: the field names are listed once per class, not per call.
        values = ((name, getattr(self, name)) for name in _field_names(type(self), _NOT_RESILIPARSE_KWARGS))
        return {k: v for k, v in values if v is not None}

    @property
    def markdownify_kwargs(self) -> dict[str, Any]:
        """The markdown options of the custom variant."""
        return self.markdownify_config.markdownify_kwargs


ExtractionConfig.register_subclass("trafilatura")(TrafilaturaConfig)
ExtractionConfig.register_subclass("markdownify")(HtmlToMarkdownConfig)
ExtractionConfig.register_subclass("resiliparse")(ResiliparseConfig)
