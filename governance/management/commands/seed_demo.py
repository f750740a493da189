from django.core.management.base import BaseCommand

from governance.services.demo import DEMO_USERS, demo_password, seed_demo


class Command(BaseCommand):
    help = "Load the demo organisation (idempotent): users per role, the AWS sample queue, Philly."

    def handle(self, *args, **options):
        seed_demo()
        self.stdout.write(self.style.SUCCESS("Demo organisation ready."))
        for user in DEMO_USERS:
            self.stdout.write(f"  {user.username:<8} {user.role:<18} password: {demo_password()}")
