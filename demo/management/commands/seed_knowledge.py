"""Publish the glossary and the demo knowledge articles (idempotent)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from demo.knowledge import seed_knowledge


class Command(BaseCommand):
    help = "Publish the glossary and the demo knowledge articles; existing ones stay as they are."

    def add_arguments(self, parser):
        parser.add_argument("--owner", default="admin", help="Username of the articles' owner.")

    def handle(self, *args, owner, **options):
        actor = get_user_model().objects.filter(username=owner).first()
        if actor is None:
            raise CommandError(f"no user named '{owner}': run seed_demo first or pass --owner")
        articles = seed_knowledge(actor=actor)
        self.stdout.write(f"{len(articles)} knowledge articles are published.")
