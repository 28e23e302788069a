"""The one way our pages write CSV. Names, check texts and rationales come from imports and LLMs;
a cell that starts like a formula would run as one when the file is opened in a spreadsheet
(OWASP "CSV injection": =HYPERLINK(...) leaking the sheet, DDE commands). Such a string gets a
leading apostrophe, which spreadsheets read as "this is text"; numbers are left alone, so a
negative score stays a number."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping

from django.http import HttpResponse
from django.utils.text import slugify

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_response(filename: str, columns: list[str], rows: Iterable[Mapping]) -> HttpResponse:
    """A CSV download of `columns` (the header) from each row's values under those names; a
    name the row lacks is an empty cell. The file name is slugified: a judge's name in it must
    not be able to break the header."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{slugify(filename)}.csv"'
    writer = csv.writer(response)
    writer.writerow([csv_cell(column) for column in columns])
    for row in rows:
        writer.writerow([csv_cell(row.get(column)) for column in columns])
    return response
