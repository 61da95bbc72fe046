# Two steps for tests/system/toil_stest.sh: echo a message, then count its bytes with wc -c.
cwlVersion: v1.2
class: Workflow
inputs:
  message: string
outputs:
  counted:
    type: File
    outputSource: count/out
steps:
  say:
    run:
      class: CommandLineTool
      baseCommand: echo
      inputs:
        message: {type: string, inputBinding: {position: 1}}
      outputs:
        out: stdout
      stdout: said.txt
    in: {message: message}
    out: [out]
  count:
    run:
      class: CommandLineTool
      baseCommand: [wc, -c]
      inputs:
        file: {type: File, inputBinding: {position: 1}}
      outputs:
        out: stdout
      stdout: count.txt
    in: {file: say/out}
    out: [out]
