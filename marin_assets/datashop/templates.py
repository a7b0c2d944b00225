"""Marin's ``marin.datashop.templates``: the prompts of the MEDU recipe (our wording, Marin's placeholders).

* :data:`MEDU_BENCHMARK_DESCRIPTION_TEMPLATE` (``{corpus}``): describe what a target corpus needs.
* :data:`MEDU_BENCHMARK_DESCRIPTION_MERGING_TEMPLATE` (``{description_a}``, ``{description_b}``): merge two.
* :data:`MEDU_DOCUMENT_LABELING_PROMPT` (``{test_description}``, ``{example}``): grade one document, ending in
  ``Final Score: Great|Good|Okay|Poor|Useless`` -- what ``MeduDatasetOutputProcessor`` parses.
"""

MEDU_BENCHMARK_DESCRIPTION_TEMPLATE = """Below are examples from a target corpus.

{corpus}

Describe, in a few paragraphs, the knowledge and skills a document must teach to help someone do well on
tasks like these: the subject areas, the level, and the kind of reasoning involved."""

MEDU_BENCHMARK_DESCRIPTION_MERGING_TEMPLATE = """Here are two descriptions of what useful training documents
should teach.

Description A:
{description_a}

Description B:
{description_b}

Write one description that keeps everything important from both, without repeating yourself."""

MEDU_DOCUMENT_LABELING_PROMPT = """We want documents that teach the following:

{test_description}

Read the document below and judge how useful it is for that purpose.

Document:
{example}

Explain your judgement briefly, then end with one line of the form
"Final Score: <Great|Good|Okay|Poor|Useless>"."""
