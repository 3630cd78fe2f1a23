{{/*
The labels of every object: the kustomize base's app.kubernetes.io/part-of, Helm's own,
and app.kubernetes.io/name when a component is given.
*/}}
{{- define "shipfile.labels" -}}
{{- with index . "name" -}}
app.kubernetes.io/name: {{ . }}
{{ end -}}
app.kubernetes.io/part-of: shipfile
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
A shipfile image: <registry>/<repository>:<tag>, the service's tag before the global one.
*/}}
{{- define "shipfile.image" -}}
{{- $g := .root.Values.image -}}
{{- $tag := .image.tag | default $g.tag -}}
{{- if $g.registry -}}
{{ printf "%s/%s:%s" $g.registry .image.repository $tag }}
{{- else -}}
{{ printf "%s:%s" .image.repository $tag }}
{{- end -}}
{{- end }}

{{/*
What the code fixes for each service: the variable of its listen address and its port, the
ops listener where it has one, and the Secrets it reads.
*/}}
{{- define "shipfile.services" -}}
gateway:
  addrVar: SHIPFILE_HTTP_ADDR
  port: 8080
  opsVar: SHIPFILE_OPS_ADDR
  opsPort: 8084
  secrets: [database, s3, secretKey]
mailer:
  addrVar: SHIPFILE_MAILER_ADDR
  port: 8081
  secrets: [database, smtp]
expiry:
  addrVar: SHIPFILE_EXPIRY_ADDR
  port: 8082
  secrets: [database, s3]
webhooks:
  addrVar: SHIPFILE_WEBHOOKS_ADDR
  port: 8083
  secrets: [database, secretKey]
scanner:
  addrVar: SHIPFILE_SCANNER_ADDR
  port: 8085
  secrets: [database, s3]
{{- end }}

{{/* An env entry from a Secret. */}}
{{- define "shipfile.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: {{ .key }}
      {{- if index . "optional" }}
      optional: true
      {{- end }}
{{- end }}

{{/* SHIPFILE_DATABASE_URL from its Secret. */}}
{{- define "shipfile.databaseEnv" -}}
{{ include "shipfile.secretEnv" (dict "name" "SHIPFILE_DATABASE_URL" "secret" .Values.database.secretName "key" .Values.database.secretKey) }}
{{- end }}

{{/* The restricted container security context of the shipfile images. */}}
{{- define "shipfile.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/*
A service's Deployment and PodDisruptionBudget; .name is the service, .root the chart's
context.
*/}}
{{- define "shipfile.deployment" -}}
{{- $root := .root -}}
{{- $name := .name -}}
{{- $v := index $root.Values $name -}}
{{- $svc := index (include "shipfile.services" . | fromYaml) $name -}}
{{- $opsPort := index $svc "opsPort" -}}
{{- $metricsPort := $opsPort | default $svc.port -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "shipfile.labels" (dict "root" $root "name" $name) | nindent 4 }}
spec:
  {{- if not (or (eq $name "webhooks") (and (eq $name "gateway") $v.autoscaling.enabled)) }}
  replicas: {{ $v.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ $name }}
  {{- with index $v "strategy" }}
  strategy:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ $name }}
        app.kubernetes.io/instance: {{ $root.Release.Name }}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $metricsPort | quote }}
        prometheus.io/path: /metrics
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: shipfile
      automountServiceAccountToken: false
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              app.kubernetes.io/name: {{ $name }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ $name }}
          image: {{ include "shipfile.image" (dict "root" $root "image" $v.image) }}
          {{- with $root.Values.image.pullPolicy }}
          imagePullPolicy: {{ . }}
          {{- end }}
          env:
            - name: {{ $svc.addrVar }}
              value: 0.0.0.0:{{ $svc.port }}
            {{- if $opsPort }}
            - name: {{ $svc.opsVar }}
              value: 0.0.0.0:{{ $opsPort }}
            {{- end }}
            {{- if eq $name "scanner" }}
            - name: SHIPFILE_CLAMD_ADDR
              value: {{ $v.clamdAddr | default "clamav:3310" }}
            {{- end }}
            {{- range $svc.secrets }}
            {{- if eq . "database" }}
            {{- include "shipfile.databaseEnv" $root | nindent 12 }}
            {{- else if eq . "s3" }}
            {{- include "shipfile.secretEnv" (dict "name" "SHIPFILE_S3_ACCESS_KEY" "secret" $root.Values.s3.secretName "key" $root.Values.s3.accessKeyKey) | nindent 12 }}
            {{- include "shipfile.secretEnv" (dict "name" "SHIPFILE_S3_SECRET_KEY" "secret" $root.Values.s3.secretName "key" $root.Values.s3.secretKeyKey) | nindent 12 }}
            {{- else if eq . "smtp" }}
            {{- include "shipfile.secretEnv" (dict "name" "SHIPFILE_SMTP_USERNAME" "secret" $root.Values.smtp.secretName "key" $root.Values.smtp.usernameKey "optional" true) | nindent 12 }}
            {{- include "shipfile.secretEnv" (dict "name" "SHIPFILE_SMTP_PASSWORD" "secret" $root.Values.smtp.secretName "key" $root.Values.smtp.passwordKey "optional" true) | nindent 12 }}
            {{- else if eq . "secretKey" }}
            {{- include "shipfile.secretEnv" (dict "name" "SHIPFILE_SECRET_KEY" "secret" $root.Values.secretKey.secretName "key" $root.Values.secretKey.key) | nindent 12 }}
            {{- include "shipfile.secretEnv" (dict "name" "SHIPFILE_SECRET_KEY_PREVIOUS" "secret" $root.Values.secretKey.secretName "key" $root.Values.secretKey.previousKey "optional" true) | nindent 12 }}
            {{- end }}
            {{- end }}
            {{- with $root.Values.otel.endpoint }}
            - name: OTEL_EXPORTER_OTLP_ENDPOINT
              value: {{ . | quote }}
            - name: OTEL_SERVICE_NAME
              value: {{ $name }}
            {{- end }}
            {{- with $v.env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          envFrom:
            - configMapRef:
                name: shipfile
          ports:
            - name: http
              containerPort: {{ $svc.port }}
            {{- if $opsPort }}
            - name: ops
              containerPort: {{ $opsPort }}
            {{- end }}
          {{- range $probe := list "startupProbe" "readinessProbe" "livenessProbe" }}
          {{- with index $v $probe }}
          {{ $probe }}:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- end }}
          {{- with index $v "lifecycle" }}
          lifecycle:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- include "shipfile.containerSecurityContext" . | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
      volumes:
        # The root filesystem is read-only; /tmp is for the runtime.
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "shipfile.labels" (dict "root" $root "name" $name) | nindent 4 }}
spec:
  maxUnavailable: {{ $root.Values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ $name }}
{{- end }}
