from django.urls import path

from retrieval import views

urlpatterns = [
    path("search/find", views.find_view),
    path("content/read", views.content_read),
    path("content/abstract", views.content_abstract),
    path("content/overview", views.content_overview),
    path("content/write", views.content_write),
    path("content/batch-write", views.content_batch_write),
    path("fs/ls", views.fs_ls),
    path("fs/tree", views.fs_tree),
    path("fs/stat", views.fs_stat),
    path("fs/mkdir", views.fs_mkdir),
    path("fs", views.fs_remove),
    path("resources/temp_upload", views.resources_temp_upload),
    path("resources", views.resources_add),
    path("skills", views.skills),
    path("system/wait", views.system_wait),
    path("system/status", views.system_status),
    path("tasks/<uuid:task_id>", views.task_detail),
]
