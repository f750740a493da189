"""`manage.py signals_pack [--month YYYY-MM] [--email]`: make a month's leadership pack
(PDF and CSVs, stored under packs/YYYY-MM/ in the default storage), and email it to
leadership with --email. Thin: governance.dashboards.pack does the work."""

import datetime as dt

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from governance.dashboards.pack import leadership_emails, pack_make
from governance.dashboards.selectors.calendar import last_full_month, month_start


class Command(BaseCommand):
    help = "Make a month's leadership pack (default: the last full month)."

    def add_arguments(self, parser):
        parser.add_argument("--month", help="YYYY-MM (default: the last full month)")
        parser.add_argument("--email", action="store_true", help="email it to leadership")

    def handle(self, *args, month=None, email=False, **options):
        if month is None:
            day = last_full_month(timezone.now())
        else:
            try:
                day = dt.datetime.strptime(month, "%Y-%m").date()
            except ValueError:
                raise CommandError(
                    f"--month: {month!r} is not a month as YYYY-MM, such as 2025-03",
                    returncode=2,
                ) from None
            if day > month_start(timezone.now().date()):
                raise CommandError("--month: must not be after the current month", returncode=2)
        pack = pack_make(month=day, email=email)
        self.stdout.write(f"Made the pack of {day:%B %Y}: {pack.pdf} and {pack.csv}.")
        if email:
            recipients = leadership_emails()
            self.stdout.write(
                f"Emailed to {', '.join(recipients)}."
                if recipients
                else "No leadership user has an email address: nothing sent."
            )
