#!/usr/bin/env bash
# Fails when a source file of one layer includes a header of a layer it may not use
# (the table in DESIGN.md, "Layers"). The build runs it for every library,
# so an include that goes up a layer fails the build, naming the file and the line.
# usage: check_layers.sh SOURCE_ROOT LAYER STAMP_OUT
set -u
root=$1 layer=$2 stamp=$3
declare -A allowed=(
  [core]=""
  [transport]="core"
  [device]="core"
  [collectives]="core transport device"
  [model]="core transport device collectives"
  [tensor]="core device"
  [nn]="core device tensor"
  [data]="core tensor"
  [checkpoint]="core tensor nn"
  [distributed]="core transport device collectives tensor nn"
  [trainer]="core transport device collectives model tensor nn data checkpoint distributed"
)
layers="core transport device collectives model tensor nn data checkpoint distributed trainer"
bad=0
while IFS= read -r hit; do
  target=$(printf '%s\n' "$hit" | sed -E 's/^[^:]*:[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](ringlet\/)?([a-z_]+)\/.*/\2/')
  case " $layers " in *" $target "*) ;; *) continue ;; esac
  [ "$target" = "$layer" ] && continue
  case " ${allowed[$layer]} " in *" $target "*) continue ;; esac
  echo "layering violation: ${hit%%:[[:space:]]#*} includes $target/ (a $layer file may use: ${allowed[$layer]:-nothing})" >&2
  bad=1
done < <(cd "$root" && grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](ringlet/)?[a-z_]+/' "$layer" \
           --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.cc' \
           --include='*.cu' --include='*.cuh' 2>/dev/null)
[ $bad -eq 0 ] || exit 1
echo "// $layer: includes follow DESIGN.md's layering" > "$stamp"
