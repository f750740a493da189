"""The queue page's upload: a policy file to plan, then the reviewed plan to apply.

The apply form carries the uploaded file and the versions its plan read, signed, so
what is applied is exactly what was reviewed and a change made in between is caught.
"""

from django import forms
from django.core import signing

from governance.policy_code import IMPORT_FORMATS
from governance.policy_code.plan import REASON_MISSING
from governance.policy_code.source import MAX_FILE_BYTES

SALT = "governance.policy_code.apply"
# A reviewed plan is applied within a day, or planned again.
MAX_AGE_SECONDS = 24 * 3600


class UploadForm(forms.Form):
    file = forms.FileField(
        label="Policy file",
        help_text="An aws-batch JSON, CloudFormation JSON or YAML, Kueue YAML or native YAML "
        "file, up to 1 MB.",
    )
    format = forms.ChoiceField(
        label="Format",
        required=False,
        choices=[("", "Recognise it from the content"), *((f, f) for f in IMPORT_FORMATS)],
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_FILE_BYTES:
            raise forms.ValidationError(f"is larger than {MAX_FILE_BYTES // 1000} kB")
        return upload


class ApplyForm(forms.Form):
    payload = forms.CharField(widget=forms.HiddenInput)
    reason = forms.CharField(
        label="Reason for this change",
        max_length=1000,
        help_text="Why this change is made, as every policy change says. The history adds "
        "the file's name.",
        error_messages={"required": REASON_MISSING},
        widget=forms.TextInput,
    )

    @staticmethod
    def sign(*, content: str, filename: str, format: str, versions: dict) -> str:
        return signing.dumps(
            {"content": content, "filename": filename, "format": format, "versions": versions},
            salt=SALT,
            compress=True,
        )

    def clean_payload(self):
        try:
            return signing.loads(self.cleaned_data["payload"], salt=SALT, max_age=MAX_AGE_SECONDS)
        except signing.SignatureExpired:
            raise forms.ValidationError(
                "this plan is more than a day old: upload the file again"
            ) from None
        except signing.BadSignature:
            raise forms.ValidationError("this plan cannot be read: upload the file again") from None
