from django.contrib import admin
from django.urls import path

from profiles import views

urlpatterns = [
    path("recall-traffic/", admin.site.admin_view(views.recall_traffic_view), name="dashboard-recall-traffic"),
    path("llm-cost/", admin.site.admin_view(views.llm_cost_view), name="dashboard-llm-cost"),
]
