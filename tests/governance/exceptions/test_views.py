def test_the_filing_form_can_arrive_with_the_jobs_chosen(client, db):
    from django.contrib.auth.models import Group

    from fleet.models import InstanceType
    from tests.factories import JobFactory, UserFactory, aws_sample_queue

    queue = aws_sample_queue("prefill")
    qs1 = queue.shares.get(name="qs1")
    lead = UserFactory(username="prefill-lead")
    lead.groups.add(Group.objects.get_or_create(name="team_leads")[0])
    qs1.team.leads.add(lead)
    job = JobFactory(share=qs1, instance_type=InstanceType.objects.get(name="ml.g5.xlarge"))
    client.force_login(lead)

    response = client.get(f"/exceptions/new/?kind=PREEMPTION_PROTECTION&jobs={job.pk}")

    form = response.context["form"]
    assert form["kind"].value() == "PREEMPTION_PROTECTION"
    assert [str(pk) for pk in form["jobs"].value()] == [str(job.pk)]
