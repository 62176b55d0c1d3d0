"""The budget books on the Firestore emulator: a write lands only on the books as read, all of a
submission's books or none, so two submissions that read the same books cannot both reserve."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.adapters.ledger import Ledger, LedgerConflict
from shared.model.budgets import CONFIG_SCOPE, BudgetBook, Reservation, template_scope
from shared.policy.budgets import with_reservation

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
SCOPES = [template_scope("train"), CONFIG_SCOPE]


def _reserve(
    read: list[tuple[BudgetBook, datetime | None]], run_id: str
) -> list[tuple[BudgetBook, datetime | None]]:
    reservation = Reservation(run_id, 1, "train", 2.0, NOW, gpus=1)
    return [(with_reservation(book, reservation), known) for book, known in read]


def test_books_never_written_read_empty_and_are_created_once(ledger: Ledger) -> None:
    read = ledger.budget_books(SCOPES)
    assert read == [(BudgetBook(scope), None) for scope in SCOPES]

    ledger.write_budget_books(_reserve(read, "r-first"))
    with pytest.raises(LedgerConflict):  # read before the first write: both books exist now
        ledger.write_budget_books(_reserve(read, "r-second"))

    after = ledger.budget_books(SCOPES)
    assert [set(book.reservations) for book, _ in after] == [{"r-first#1"}] * 2
    assert all(known is not None for _, known in after)


def test_a_stale_read_of_one_book_writes_neither(ledger: Ledger) -> None:
    ledger.write_budget_books(_reserve(ledger.budget_books(SCOPES), "r-first"))
    both = ledger.budget_books(SCOPES)
    # Another submission, held to the config's budget only, reserves meanwhile.
    [config_book] = ledger.budget_books([CONFIG_SCOPE])
    ledger.write_budget_books(_reserve([config_book], "r-other"))

    with pytest.raises(LedgerConflict):
        ledger.write_budget_books(_reserve(both, "r-late"))

    template_book, config_now = (book for book, _ in ledger.budget_books(SCOPES))
    assert set(template_book.reservations) == {"r-first#1"}  # the batch wrote nothing
    assert set(config_now.reservations) == {"r-first#1", "r-other#1"}
    fresh = ledger.budget_books(SCOPES)
    ledger.write_budget_books(_reserve(fresh, "r-late"))  # read again: it lands
    assert all("r-late#1" in book.reservations for book, _ in ledger.budget_books(SCOPES))


def test_a_book_with_the_old_settled_list_is_read_into_hours_and_rewritten_without_it(
    ledger: Ledger,
) -> None:
    scope = template_scope("train")
    document = ledger._budget_document(scope)
    document.set(
        {
            "scope": scope,
            "reservations": {},
            "settled": {
                "r-a#1": {
                    "run_id": "r-a",
                    "attempt": 1,
                    "template": "train",
                    "gpus": 2,
                    "started_at": NOW - timedelta(minutes=30),
                    "ended_at": NOW,
                }
            },
            "alerted": [],
        }
    )
    [(book, known)] = ledger.budget_books([scope])
    assert book.spent_by_hour == {NOW - timedelta(hours=1): 1.0}

    ledger.write_budget_books(_reserve([(book, known)], "r-new"))

    stored = document.get().to_dict()
    assert stored is not None and "settled" not in stored
    assert stored["spent_by_hour"] == {"2026-03-10T11": 1.0}
    [(again, _)] = ledger.budget_books([scope])
    assert again.spent_by_hour == book.spent_by_hour  # counted once
