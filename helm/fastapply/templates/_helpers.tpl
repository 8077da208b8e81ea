{{/* Names and labels. */}}
{{- define "fastapply.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "fastapply.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "fastapply.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "fastapply.labels" -}}
helm.sh/chart: {{ include "fastapply.chart" . }}
app.kubernetes.io/name: {{ include "fastapply.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector of the serving pods (the build Job's pods carry component=build instead). */}}
{{- define "fastapply.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fastapply.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{- define "fastapply.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fastapply.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fastapply.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* True ("true") when the pods need an engine: a GPU is asked for. */}}
{{- define "fastapply.usesEngine" -}}
{{- if gt (int .Values.gpu.count) 0 }}true{{ end }}
{{- end }}

{{/* The runtime actually served: deterministic on CPU, serve.runtime with a GPU. */}}
{{- define "fastapply.runtime" -}}
{{- if include "fastapply.usesEngine" . }}{{ .Values.serve.runtime }}{{ else }}deterministic{{ end }}
{{- end }}

{{/* The build output directory as the pods see it. */}}
{{- define "fastapply.engineRoot" -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.engine.mountPath) .Values.engine.dir }}
{{- end }}

{{/*
The build layout of engine_build/layout.py (tests/engine_build/test_engine_build.py checks they agree):
`fastapply build all --out <engineRoot>` builds into <engineRoot>/builds/<key> and, once
done, switches the <engineRoot>/current symlink to it; pods read through the pointer, so a
rebuild never overwrites the engine a pod is serving.
*/}}
{{- define "fastapply.layout" -}}
{"current": "current", "merged": "merged", "quantizedHf": "quantized/hf", "engine": "engine", "modelRepository": "model_repository"}
{{- end }}

{{/* The published build as the pods see it. */}}
{{- define "fastapply.publishedBuild" -}}
{{- printf "%s/%s" (include "fastapply.engineRoot" .) (include "fastapply.layout" . | fromJson).current }}
{{- end }}

{{/* A path in the published build, or itself when absolute. Call with (list $ "path"). */}}
{{- define "fastapply.underEngine" -}}
{{- $ctx := index . 0 }}{{ $p := index . 1 }}
{{- if hasPrefix "/" $p }}{{ $p }}{{ else }}{{ printf "%s/%s" (include "fastapply.publishedBuild" $ctx) $p }}{{ end }}
{{- end }}

{{/* A path under the engine mount, or itself when absolute. Call with (list $ "path"). */}}
{{- define "fastapply.underMount" -}}
{{- $ctx := index . 0 }}{{ $p := index . 1 }}
{{- if hasPrefix "/" $p }}{{ $p }}{{ else }}{{ printf "%s/%s" (trimSuffix "/" $ctx.Values.engine.mountPath) $p }}{{ end }}
{{- end }}

{{/* The engine PVC's name: the existing claim, or the one the chart creates. */}}
{{- define "fastapply.engineClaim" -}}
{{- if .Values.engine.pvc.existingClaim }}{{ .Values.engine.pvc.existingClaim }}{{ else }}{{ include "fastapply.fullname" . }}-engine{{ end }}
{{- end }}

{{/*
Build id: a hash of everything that changes the engine. It names the build Job (a Job's
template is immutable, so a changed build gets a new Job) and is written to the marker file
the serving pods wait for, so they never start on a stale or half-written engine.
*/}}
{{- define "fastapply.buildId" -}}
{{- $b := .Values.engine.build }}
{{- list $b.profile $b.model $b.adapterPath $b.extraArgs (include "fastapply.image" .) .Values.engine.dir | toJson | sha256sum | trunc 10 }}
{{- end }}

{{- define "fastapply.buildMarker" -}}
{{- printf "%s/.fastapply-build-complete" (include "fastapply.engineRoot" .) }}
{{- end }}

{{/* `fastapply serve` arguments, assembled from values. */}}
{{- define "fastapply.serveArgs" -}}
{{- $runtime := include "fastapply.runtime" . -}}
{{- $layout := include "fastapply.layout" . | fromJson -}}
- serve
- --runtime
- {{ $runtime }}
{{- if and (include "fastapply.usesEngine" .) .Values.serve.modelRepository }}
- --model-repository
- {{ include "fastapply.underEngine" (list . .Values.serve.modelRepository) }}
{{- else if or (eq $runtime "torch") (eq $runtime "trtllm-pytorch") }}
- --model
- {{ include "fastapply.underEngine" (list . (default (ternary $layout.merged $layout.quantizedHf (eq $runtime "torch")) .Values.serve.modelPath)) }}
{{- else if eq $runtime "trtllm-engine" }}
- --engine
- {{ include "fastapply.underEngine" (list . .Values.serve.enginePath) }}
- --tokenizer
- {{ include "fastapply.underEngine" (list . .Values.serve.tokenizerPath) }}
{{- end }}
{{- if ne $runtime "deterministic" }}
- --prompt-format
- {{ .Values.serve.promptFormat }}
- --max-draft-len
- {{ int .Values.serve.maxDraftLen | quote }}
{{- if not (kindIs "invalid" .Values.serve.contextLimit) }}
- --context-limit
- {{ int64 .Values.serve.contextLimit | quote }}
{{- end }}
{{- if eq $runtime "torch" }}
- --device
- cuda
{{- end }}
{{- end }}
- --host
- 0.0.0.0
- --http-port
- {{ int .Values.ports.http | quote }}
- --grpc-port
- {{ int .Values.ports.grpc | quote }}
- --metrics-port
- {{ int .Values.ports.metrics | quote }}
- --grace-period-s
- {{ include "fastapply.drainSeconds" . | quote }}
{{- if .Values.ports.openai }}
- --openai-port
- {{ int .Values.ports.openai | quote }}
{{- end }}
{{- range .Values.serve.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* The build Job's name: fixed per build id (<= 63 characters). */}}
{{- define "fastapply.buildJobName" -}}
{{- printf "%s-build-%s" (include "fastapply.fullname" . | trunc 46 | trimSuffix "-") (include "fastapply.buildId" .) }}
{{- end }}

{{/*
Affinity with the GPU-product requirement: `gpu.products` (values of the GPU feature
discovery label nvidia.com/gpu.product) is ANDed into every required node selector term of
the given affinity (one term when it has none). Call with (list $ affinity); prints YAML,
empty when there is nothing to say.
*/}}
{{- define "fastapply.affinity" -}}
{{- $ctx := index . 0 }}
{{- $affinity := deepCopy (default (dict) (index . 1)) }}
{{- $products := $ctx.Values.gpu.products }}
{{- if and $products (include "fastapply.usesEngine" $ctx) }}
{{- $node := default (dict) $affinity.nodeAffinity }}
{{- $required := default (dict) (get $node "requiredDuringSchedulingIgnoredDuringExecution") }}
{{- $terms := default (list (dict)) $required.nodeSelectorTerms }}
{{- $product := dict "key" "nvidia.com/gpu.product" "operator" "In" "values" $products }}
{{- $withProduct := list }}
{{- range $terms }}
{{- $term := deepCopy . }}
{{- $_ := set $term "matchExpressions" (append (default (list) $term.matchExpressions) $product) }}
{{- $withProduct = append $withProduct $term }}
{{- end }}
{{- $_ := set $required "nodeSelectorTerms" $withProduct }}
{{- $_ := set $node "requiredDuringSchedulingIgnoredDuringExecution" $required }}
{{- $_ := set $affinity "nodeAffinity" $node }}
{{- end }}
{{- if $affinity }}{{ toYaml $affinity }}{{ end }}
{{- end }}

{{/* The load-test image (the Dockerfile's `loadtest` target). */}}
{{- define "fastapply.loadtestImage" -}}
{{- printf "%s:%s" .Values.loadtest.image.repository (default .Chart.AppVersion .Values.loadtest.image.tag) }}
{{- end }}

{{/* PromQL label matchers of the serving pods' series (as scraped by the Service/PodMonitor). */}}
{{- define "fastapply.podMatchers" -}}
{{- printf "namespace=%q, pod=~%q" .Release.Namespace (printf "%s-.*" (include "fastapply.fullname" .)) }}
{{- end }}

{{/*
Seconds `fastapply serve` drains in-flight requests after SIGTERM: the pod's grace period
less 30 s, the margin serve needs to stop tritonserver, report what it dropped and exit
before the kubelet's SIGKILL (it needs more than 15 s past the drain).
*/}}
{{- define "fastapply.drainSeconds" -}}
{{- max 0 (sub (int .Values.terminationGracePeriodSeconds) 30) -}}
{{- end }}
