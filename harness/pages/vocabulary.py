"""The words the published pages use, per language: section headings, the kind column, the
dimension range ("1 to 8", "1 à 8", "1 bis 8"), the in-place sentence, the Availability sentence.
One table per language, so a fourth language is a new entry, not new parsing code.

Headings are matched case-insensitively against a whole line (the rendered pages print a heading
as a line of its own); the translations are the ones Microsoft's localized pages use, including
their variants (FR prints both "Prise en charge des tenseurs" and "Prise en charge de Tensor")."""
from __future__ import annotations

import re

LANGUAGES = ("en", "fr", "de")

# section -> a pattern of its heading line in any of the languages (lower-cased, whole line); the
# localized pages word some headings more than one way ("Contraintes tensoriels", "Contraintes Tensor")
HEADINGS: dict[str, re.Pattern] = {name: re.compile(pattern) for name, pattern in {
    "syntax": r"syntax|syntaxe",
    "members": r"members|membres|member|mitglieder",
    "examples": r"examples?|exemples?|beispiele?",
    "remarks": r"remarks|remarques|hinweise|bemerkungen",
    "availability": r"availability|disponibilité|verfügbarkeit",
    "constraints": r"tensor constraints|contraintes? (?:de )?tens\w*|tensoreinschränkungen",
    "support": r"tensor support(?: according to \w+)?|prise en charge (?:des |de |du )?tens\w*(?: selon .*)?|tensorunterstützung(?: .*)?",
    "requirements": r"requirements|configuration requise|exigences|anforderungen",
    "see_also": r"see also|voir aussi|siehe auch",
}.items()}

# the kind column: printed words -> the spec's kind
KINDS: dict[str, str] = {
    "input": "input", "output": "output", "optional input": "optional_input", "optional output": "optional_output",
    "array of inputs": "input", "array of outputs": "output",
    "entrée": "input", "sortie": "output", "entrée facultative": "optional_input", "sortie facultative": "optional_output",
    "entrée optionnelle": "optional_input", "sortie optionnelle": "optional_output",
    "tableau d’entrées": "input", "tableau d'entrées": "input", "tableau de sorties": "output",
    "eingabe": "input", "ausgabe": "output", "optionale eingabe": "optional_input", "optionale ausgabe": "optional_output",
    "array von eingaben": "input", "array von ausgaben": "output",
}

ARRAY_KINDS = {"array of inputs", "array of outputs", "tableau d’entrées", "tableau d'entrées", "tableau de sorties",
               "array von eingaben", "array von ausgaben"}
# a count field's description: "This field determines the size of the Axes array". The names
# between are at most 120 characters: an unbounded lazy `.+?` would rescan the rest of the line
# from every occurrence of the phrase (a line of 10,000 of them took half a minute).
SIZE_OF = re.compile(r"determines the size of (?:the )?(.{1,120}?) arrays?\b|bestimmt die Größe (?:de[rs] )?(.{1,120}?)-?Arrays?\b|"
                     r"détermine la taille (?:des? |du )?(?:tableaux? )?(.{1,120}?)(?: tableaux?)?[.,]", re.I)

RANGE_WORDS = ("to", "à", "bis")
AND_WORDS = ("and", "et", "und")

# the sentence that permits in-place execution, per language (the pages' own wording)
IN_PLACE = {
    "en": re.compile(r"supports in-place execution", re.I),
    "fr": re.compile(r"prend en charge l[’']exécution sur place", re.I),
    "de": re.compile(r"unterstützt die (?:direkte |in-place-)ausführung", re.I),
}

# words that tell a page's language apart (the rendered pages carry no language tag)
MARKERS = {
    "fr": ("Syntaxe", "Membres", "Disponibilité", "Entrée", "Sortie", "et versions ultérieures", "Cet opérateur"),
    "de": ("Verfügbarkeit", "Eingabe", "Ausgabe", "und höher", "Dieser Operator", "Tensorunterstützung", "Typ:"),
    "en": ("Availability", "Members", "Input", "Output", "and above", "This operator", "Tensor support"),
}

LEVEL = re.compile(r"DML_FEATURE_LEVEL_(\d+)_(\d+)")


def level_name(match: re.Match) -> str:
    """DML_FEATURE_LEVEL_5_1 -> "5.1"."""
    return f"{int(match.group(1))}.{int(match.group(2))}"


def heading_section(line: str) -> str | None:
    """The section a heading line opens, in any language, or None."""
    text = " ".join(line.strip().strip("#").strip().rstrip(":").lower().split())
    for section, pattern in HEADINGS.items():
        if pattern.fullmatch(text):
            return section
    return None


def is_array_kind(words: str) -> bool:
    """Whether the kind column's words name a tensor array ("Array of inputs")."""
    return " ".join(words.split()).lower() in ARRAY_KINDS


def kind_of(words: str) -> str | None:
    """The spec's kind for the kind column's words, or None when they are no known kind."""
    return KINDS.get(" ".join(words.replace("\u00a0", " ").split()).lower())


def dims_of(text: str) -> tuple[int, int] | None:
    """"1 to 8" / "1 à 8" / "1 bis 8" -> (1, 8); "4" -> (4, 4); anything else None."""
    parts = text.replace("\u00a0", " ").split()
    if len(parts) == 1 and parts[0].isdigit():
        return int(parts[0]), int(parts[0])
    if len(parts) == 3 and parts[0].isdigit() and parts[2].isdigit() and parts[1].lower() in RANGE_WORDS:
        return int(parts[0]), int(parts[2])
    return None


def guess_language(text: str) -> str:
    """The language whose marker words the text holds most of."""
    counts = {lang: sum(len(re.findall(rf"(?<!\w){re.escape(m)}(?!\w)", text)) for m in words) for lang, words in MARKERS.items()}
    return max(LANGUAGES, key=lambda lang: (counts[lang], lang == "en"))
