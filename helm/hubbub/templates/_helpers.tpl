{{/* Names, labels, the image, the shared pod pieces and the render-time checks. */}}

{{- define "hubbub.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hubbub.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hubbub.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hubbub.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hubbub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hubbub.labels" -}}
helm.sh/chart: {{ include "hubbub.chart" . }}
{{ include "hubbub.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hubbub
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of one component: (dict "ctx" $ "component" "gateway") */}}
{{- define "hubbub.componentLabels" -}}
{{ include "hubbub.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "hubbub.componentSelectorLabels" -}}
{{ include "hubbub.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "hubbub.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hubbub.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "hubbub.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
Platform ids joined by commas. Unquoted numbers in values files arrive as floats
(-1001234567890 would print as -1.00123456789e+12), so whole numbers are printed as integers.
*/}}
{{- define "hubbub.joinIds" -}}
{{- $ids := list -}}
{{- range . -}}
{{- if or (kindIs "float64" .) (kindIs "int64" .) (kindIs "int" .) -}}
{{- $ids = append $ids (printf "%d" (int64 .)) -}}
{{- else -}}
{{- $ids = append $ids (toString .) -}}
{{- end -}}
{{- end -}}
{{- join "," $ids -}}
{{- end -}}

{{/* The Secret the chart creates (only when it has something to hold). */}}
{{- define "hubbub.secretName" -}}
{{- include "hubbub.fullname" . -}}
{{- end -}}

{{/* Secret values the chart stores itself (env name -> value), as YAML. */}}
{{- define "hubbub.secretData" -}}
{{- $data := dict -}}
{{- if not .Values.database.existingSecret -}}
{{- $_ := set $data "HUBBUB_DATABASE_URL" .Values.database.url -}}
{{- end -}}
{{- if not .Values.redis.existingSecret -}}
{{- $_ := set $data "HUBBUB_REDIS_URL" .Values.redis.url -}}
{{- end -}}
{{- if not .Values.secrets.existingSecret -}}
{{- $s := .Values.secrets -}}
{{- $named := dict "HUBBUB_SECRET_KEY" $s.secretKey "HUBBUB_LLM_API_KEY" $s.llmApiKey "HUBBUB_TELEGRAM_TOKEN" $s.telegramToken "HUBBUB_TELEGRAM_WEBHOOK_SECRET" $s.telegramWebhookSecret "HUBBUB_DISCORD_TOKEN" $s.discordToken "HUBBUB_SLACK_BOT_TOKEN" $s.slackBotToken "HUBBUB_SLACK_SIGNING_SECRET" $s.slackSigningSecret "HUBBUB_SLACK_APP_TOKEN" $s.slackAppToken -}}
{{- range $key, $value := $named -}}
{{- if $value -}}
{{- $_ := set $data $key $value -}}
{{- end -}}
{{- end -}}
{{- range $key, $value := $s.extra -}}
{{- $_ := set $data $key $value -}}
{{- end -}}
{{- end -}}
{{- toYaml $data -}}
{{- end -}}

{{/*
Checks that JSON schema cannot express; each failure says what to set.
Included by every workload template, so `helm template` fails early and clearly.
*/}}
{{- define "hubbub.validate" -}}
{{- $v := .Values -}}
{{- $db := $v.database.url -}}
{{- if and (not $v.database.existingSecret) (not $db) -}}
{{- fail "\n\nHubbub needs an external Postgres: set database.url (postgresql://user:password@host:5432/hubbub) or database.existingSecret.\nThe embedded SQLite mode is for one machine, not Kubernetes." -}}
{{- end -}}
{{- if and (not $v.database.existingSecret) (not (hasPrefix "postgresql" $db)) -}}
{{- if hasPrefix "sqlite" $db -}}
{{- fail "\n\ndatabase.url is SQLite: the embedded SQLite mode is for one machine, not Kubernetes (every pod would keep its own database). Use Postgres: postgresql://user:password@host:5432/hubbub" -}}
{{- end -}}
{{- fail "\n\ndatabase.url must be a Postgres URL starting with postgresql:// (or postgresql+DRIVER://)" -}}
{{- end -}}
{{- if and (not $v.redis.existingSecret) (not $v.redis.url) -}}
{{- fail "\n\nHubbub on Kubernetes needs Redis as its Celery broker: set redis.url (redis://:password@host:6379/0) or redis.existingSecret." -}}
{{- end -}}
{{- if and (not $v.redis.existingSecret) (not (regexMatch "^rediss?://" $v.redis.url)) -}}
{{- fail "\n\nredis.url must start with redis:// or rediss://" -}}
{{- end -}}
{{- if and (not $v.secrets.existingSecret) (not $v.secrets.secretKey) -}}
{{- fail "\n\nsecrets.secretKey (HUBBUB_SECRET_KEY) is required: every pod must share one Fernet key, or bot credentials sealed by one pod cannot be read by another. Make one with:\n  python -c \"from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())\"\nor put it in a Secret named by secrets.existingSecret." -}}
{{- end -}}
{{- if and (eq $v.secrets.existingSecret (include "hubbub.secretName" .)) (ne (include "hubbub.secretData" .) "{}") -}}
{{- fail (printf "\n\nsecrets.existingSecret must not be named %q: the chart creates a Secret of that name for the values it stores." $v.secrets.existingSecret) -}}
{{- end -}}
{{- $grace := $v.config.shutdownGraceSeconds | float64 -}}
{{- if le ($v.worker.terminationGracePeriodSeconds | float64) $grace -}}
{{- fail (printf "\n\nworker.terminationGracePeriodSeconds (%v) must be longer than config.shutdownGraceSeconds (%v): a stopping worker finishes its running turns first." $v.worker.terminationGracePeriodSeconds $v.config.shutdownGraceSeconds) -}}
{{- end -}}
{{- if le ($v.gateway.terminationGracePeriodSeconds | float64) (addf $grace ($v.gateway.preStopSleepSeconds | float64)) -}}
{{- fail (printf "\n\ngateway.terminationGracePeriodSeconds (%v) must be longer than config.shutdownGraceSeconds (%v) + gateway.preStopSleepSeconds (%v)." $v.gateway.terminationGracePeriodSeconds $v.config.shutdownGraceSeconds $v.gateway.preStopSleepSeconds) -}}
{{- end -}}
{{- if lt ($v.config.compression.hygieneThreshold | float64) ($v.config.compression.threshold | float64) -}}
{{- fail "\n\nconfig.compression.hygieneThreshold must not be below config.compression.threshold (hygiene is the safety net above the compressor)." -}}
{{- end -}}
{{- if and (gt (int $v.gateway.replicaCount) 1) (eq $v.config.telegramMode "polling") -}}
{{- fail "\n\nconfig.telegramMode=polling works with one gateway replica only (Telegram allows one poller per bot). Set config.publicUrl and telegramMode auto or webhook, or gateway.replicaCount=1." -}}
{{- end -}}
{{- if and $v.worker.autoscaling.enabled (lt (int $v.worker.autoscaling.maxReplicas) (int $v.worker.autoscaling.minReplicas)) -}}
{{- fail (printf "\n\nworker.autoscaling.maxReplicas (%v) must not be below worker.autoscaling.minReplicas (%v)." $v.worker.autoscaling.maxReplicas $v.worker.autoscaling.minReplicas) -}}
{{- end -}}
{{- if and (eq $v.config.telegramMode "webhook") (not $v.config.publicUrl) -}}
{{- fail "\n\nconfig.telegramMode=webhook needs config.publicUrl (Telegram posts to <publicUrl>/webhooks/telegram/<bot>)." -}}
{{- end -}}
{{- if and $v.worker.metrics.enabled (eq (int $v.worker.metrics.port) (int $v.gateway.port)) -}}
{{- fail "\n\nworker.metrics.port must differ from gateway.port." -}}
{{- end -}}
{{- end -}}

{{/* checksum annotations: pods restart when settings or chart-managed secrets change. */}}
{{- define "hubbub.checksums" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include "hubbub.secretData" . | sha256sum }}
{{- end -}}

{{/* Environment of every Hubbub container; the per-role variables are added by the caller. */}}
{{- define "hubbub.envFrom" -}}
- configMapRef:
    name: {{ include "hubbub.fullname" . }}
{{- if ne (include "hubbub.secretData" .) "{}" }}
- secretRef:
    name: {{ include "hubbub.secretName" . }}
{{- end }}
{{- with .Values.secrets.existingSecret }}
- secretRef:
    name: {{ . }}
{{- end }}
{{- with .Values.extraEnvFrom }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* URLs from existing Secrets; they win over anything from envFrom. */}}
{{- define "hubbub.urlEnv" -}}
{{- with .Values.database.existingSecret }}
- name: HUBBUB_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.database.existingSecretKey }}
{{- end }}
{{- with .Values.redis.existingSecret }}
- name: HUBBUB_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.redis.existingSecretKey }}
{{- end }}
{{- end -}}

{{- define "hubbub.volumes" -}}
- name: home
  emptyDir:
    sizeLimit: {{ .Values.scratchSizeLimit }}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.scratchSizeLimit }}
{{- if .Values.config.contextFiles }}
- name: context-files
  configMap:
    name: {{ include "hubbub.fullname" . }}-context
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "hubbub.volumeMounts" -}}
- name: home
  mountPath: /var/lib/hubbub
- name: tmp
  mountPath: /tmp
{{- if .Values.config.contextFiles }}
- name: context-files
  mountPath: /etc/hubbub/context
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Scheduling fields of a pod spec: (dict "ctx" $ "role" .Values.gateway) */}}
{{- define "hubbub.scheduling" -}}
{{- with .role.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .role.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
