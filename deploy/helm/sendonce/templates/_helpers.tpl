{{- define "sendonce.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sendonce.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "sendonce.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sendonce.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The variables every process gets: the database, the secret key and
the transport by reference to Secrets, then the user's own. */}}
{{- define "sendonce.env" -}}
- name: SENDONCE_DB
  valueFrom:
    secretKeyRef:
      name: {{ required "database.existingSecret: the Secret holding the PostgreSQL URL" .Values.database.existingSecret }}
      key: {{ .Values.database.urlKey }}
{{- if .Values.secretKey.existingSecret }}
- name: SENDONCE_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secretKey.existingSecret }}
      key: {{ .Values.secretKey.key }}
{{- end }}
{{- if .Values.transportSecret.existingSecret }}
- name: SENDONCE_TRANSPORT
  valueFrom:
    secretKeyRef:
      name: {{ .Values.transportSecret.existingSecret }}
      key: {{ .Values.transportSecret.key }}
{{- else }}
- name: SENDONCE_TRANSPORT
  value: {{ .Values.transport | quote }}
{{- end }}
- name: SENDONCE_LOG_FORMAT
  value: json
{{- with .Values.env }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "sendonce.pod" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}
