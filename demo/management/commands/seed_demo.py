from django.core.management.base import BaseCommand

from demo.organisation import DEMO_USERS, demo_password, seed_demo_with_history


class Command(BaseCommand):
    help = "Load the demo organisation (idempotent): users per role, the AWS sample queue, Philly."

    def add_arguments(self, parser):
        parser.add_argument(
            "--months",
            type=int,
            default=3,
            help="months of Philly workload to replay into the history (0: none)",
        )

    def handle(self, *args, months, **options):
        self.stdout.write(f"Loading the demo organisation and {months} months of history…")
        seed_demo_with_history(months=months)
        self.stdout.write(self.style.SUCCESS("Demo organisation ready."))
        for user in DEMO_USERS:
            self.stdout.write(f"  {user.username:<8} {user.role:<18} password: {demo_password()}")
