{{/*
Named templates shared by the chart. Keep every template inside the subset that
deploy/renderer understands (see deploy/renderer/parse.ts); CI renders and
validates the chart with it.
*/}}

{{- define "dispatch.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dispatch.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "dispatch.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "dispatch.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "dispatch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "dispatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dispatch
{{- end }}

{{/* Selector labels of one component: include with (dict "root" $ "component" "gateway"). */}}
{{- define "dispatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dispatch.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "dispatch.gateway.fullname" -}}
{{- printf "%s-gateway" (include "dispatch.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dispatch.modelServer.fullname" -}}
{{- printf "%s-model-server" (include "dispatch.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dispatch.redis.fullname" -}}
{{- printf "%s-redis" (include "dispatch.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dispatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- .Values.serviceAccount.name | default (include "dispatch.gateway.fullname" .) }}
{{- else }}
{{- .Values.serviceAccount.name | default "default" }}
{{- end }}
{{- end }}

{{/* image reference: include with (dict "image" .Values.gateway.image "root" $) */}}
{{- define "dispatch.image" -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .root.Chart.AppVersion | toString) }}
{{- end }}

{{/* The Secret that holds the Redis URL (chart-made or the user's). */}}
{{- define "dispatch.redis.secretName" -}}
{{- .Values.redis.external.existingSecret | default (printf "%s-redis-url" (include "dispatch.fullname" .)) }}
{{- end }}

{{- define "dispatch.auth.secretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-auth" (include "dispatch.fullname" .)) }}
{{- end }}

{{/* Restricted pod-security settings shared by every container we ship. */}}
{{- define "dispatch.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}
